/* A library the fake_missing_dep plugin links against; the tests make sure
 * the loader cannot find it at run time. */
__attribute__((visibility("default"))) int kiln_fake_dep_value(void) { return 7; }
