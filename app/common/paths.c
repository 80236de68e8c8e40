/* paths.c: XDG base directories and directory creation. */
#include "paths.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const xdg_var[] = {"XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"};
static const char *const xdg_fallback[] = {".config", ".local/share", ".local/state"};

int paths_dir(paths_kind kind, const char *sub, char *buf, size_t cap, err_t *err)
{
    const char *base = getenv(xdg_var[kind]);
    int n;
    /* The spec: a relative path in an XDG variable is invalid and ignored. */
    if (base && base[0] == '/') {
        n = snprintf(buf, cap, "%s/glmchat%s%s", base, sub ? "/" : "", sub ? sub : "");
    } else {
        const char *home = getenv("HOME");
        if (!home || !home[0])
            return err_set(err, "neither $%s nor $HOME is set", xdg_var[kind]);
        n = snprintf(buf, cap, "%s/%s/glmchat%s%s", home, xdg_fallback[kind], sub ? "/" : "",
                     sub ? sub : "");
    }
    if (n < 0 || (size_t)n >= cap)
        return err_set(err, "the %s directory path is too long", xdg_var[kind]);
    return 0;
}

int paths_mkdir_p(const char *dir, err_t *err)
{
    char tmp[PATH_MAX];
    size_t len = strlen(dir);
    if (len == 0 || len >= sizeof tmp)
        return err_set(err, "%s: bad directory path", dir);
    memcpy(tmp, dir, len + 1);
    for (char *p = tmp + 1; ; p++) {
        if (*p != '/' && *p != 0)
            continue;
        char saved = *p;
        *p = 0;
        if (mkdir(tmp, 0700) != 0 && errno != EEXIST)
            return err_set(err, "%s: cannot create directory: %s", tmp, strerror(errno));
        *p = saved;
        if (saved == 0)
            break;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return err_set(err, "%s: not a directory", dir);
    return 0;
}

int paths_ensure_dir(paths_kind kind, const char *sub, char *buf, size_t cap, err_t *err)
{
    if (paths_dir(kind, sub, buf, cap, err) != 0)
        return -1;
    return paths_mkdir_p(buf, err);
}

int paths_exe_dir(char *buf, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
    if (n <= 0 || (size_t)n >= cap - 1)
        return -1;
    buf[n] = 0;
    char *slash = strrchr(buf, '/');
    if (!slash)
        return -1;
    *slash = 0;
    return 0;
}

bool paths_is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int paths_expand_user(const char *path, char *buf, size_t cap, err_t *err)
{
    int n;
    if (path[0] == '~' && (path[1] == '/' || path[1] == 0)) {
        const char *home = getenv("HOME");
        if (!home)
            return err_set(err, "%s: $HOME is not set", path);
        n = snprintf(buf, cap, "%s%s", home, path + 1);
    } else {
        n = snprintf(buf, cap, "%s", path);
    }
    if (n < 0 || (size_t)n >= cap)
        return err_set(err, "%.200s...: path too long", path);
    return 0;
}
