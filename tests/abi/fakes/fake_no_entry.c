/* A shared library that is not a Kiln plugin: it exports functions, but not
 * kiln_backend_entry. */
__attribute__((visibility("default"))) int kiln_backend_entry_v0(void) { return 42; }
