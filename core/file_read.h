/* file_read.h: reading the small files users hand us (conversations,
 * settings, themes), which are untrusted.
 *
 * Promises: never blocks and never loops on something that is not a file:
 * the path is opened with O_NONBLOCK (a FIFO with no writer does not hang
 * the open) and refused unless fstat says it is a regular file (a FIFO, a
 * directory, a device such as /dev/zero -- also behind a symlink); never
 * reads more than `cap` bytes (a file that grows while read is refused as
 * too large); the data is NUL-terminated for the caller's convenience (it
 * may hold NUL bytes itself: text parsers check).  Errors are one line,
 * "PATH: what"; on failure errno is the open(2) error when the open failed
 * and 0 otherwise (so a caller can treat a missing file as "none"). */
#ifndef GLM_FILE_READ_H
#define GLM_FILE_READ_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* Reads the whole regular file at path (at most cap bytes) into a malloc'd
 * buffer.  `what` names the kind of file in errors ("too large for a
 * WHAT").  Returns 0, or -1 with err set and *data NULL. */
int file_read_regular(const char *path, size_t cap, const char *what, char **data, size_t *len, err_t *err);

/* Reads the last `max` bytes of the regular file at path (all of it when
 * smaller) into a malloc'd, NUL-terminated buffer, *start the file offset
 * of its first byte: a log that only grows (the input history) is read
 * from its recent end.  Same refusals and errno convention as
 * file_read_regular. */
int file_read_tail(const char *path, size_t max, char **data, size_t *len, uint64_t *start, err_t *err);

/* 3 when text starts with a UTF-8 byte order mark (EF BB BF), else 0.
 * Some editors (Notepad among them) start every file with one; the readers
 * of conversations, settings and themes skip it. */
size_t file_bom_len(const char *text, size_t len);

#endif
