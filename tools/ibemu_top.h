/* SPDX-License-Identifier: MIT */
/* `ibemu top` (ibemu_top.c): a live view of the node; argv[0] is "top".
 * Returns the command's exit status. */
#ifndef IBEMU_TOP_H
#define IBEMU_TOP_H

int ibemu_top(int argc, char **argv);

#endif /* IBEMU_TOP_H */
