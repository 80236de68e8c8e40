/* tty_pending: prints how many bytes wait unread in a terminal's input
 * queue, for tests/tmux_lib.sh (a test's keys have been read by the app
 * when the pane's queue is empty).
 *
 *   tty_pending /dev/pts/N */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <errno.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: tty_pending /dev/pts/N\n");
        return 2;
    }
    int fd = open(argv[1], O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "tty_pending: %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    int n = 0;
    int rc = ioctl(fd, FIONREAD, &n);
    int e = errno;
    close(fd);
    if (rc != 0) {
        fprintf(stderr, "tty_pending: %s: %s\n", argv[1], strerror(e));
        return 1;
    }
    printf("%d\n", n);
    return 0;
}
