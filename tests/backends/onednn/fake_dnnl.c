/* A stand-in for libdnnl.so.2 that exports every function the oneDNN plugin
 * resolves except dnnl_primitive_execute: loading it must make the backend
 * unavailable with a reason naming that symbol (and nothing is ever called). */
#include "dnnl_functions.h"

#define dnnl_primitive_execute kiln_fake_dnnl_not_exported
#define KILN_FAKE_DEFINE(f) __attribute__((visibility("default"))) void f(void) {}
KILN_DNNL_FUNCTIONS(KILN_FAKE_DEFINE)
