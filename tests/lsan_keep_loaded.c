/* lsan_keep_loaded.c: a dlclose() that keeps the library loaded, preloaded
 * (LD_PRELOAD) by tests/run.sh into the sanitizer test runs only.
 *
 * The Vulkan loader unloads a driver when the last instance is destroyed;
 * LeakSanitizer, scanning memory at exit, then no longer sees the driver's
 * globals and reports the blocks they pointed to as leaks of an "<unknown
 * module>" that no suppression can name (lavapipe: 128 bytes).  Libraries
 * that stay mapped keep their globals as roots and their names for
 * tests/lsan.supp.  Not part of glmchat; built by tests/run.sh. */
int dlclose(void *handle);

int dlclose(void *handle)
{
    (void)handle;
    return 0; /* success, as glibc's dlclose; the library simply stays */
}
