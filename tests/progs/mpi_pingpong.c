// SPDX-License-Identifier: MIT
/*
 * An MPI ping-pong between ranks 0 and 1 with every byte checked: each
 * round, rank 0 sends a pattern that depends on the round and the size,
 * rank 1 checks it and sends it back transformed, rank 0 checks that.
 * Sizes from 1 byte to 4 MiB cross the eager and rendezvous protocols.
 *
 * Exit: 0 pass, 1 fail (rank 0 reports).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_LEN (4u << 20)
#define ROUNDS 20

static unsigned char pattern(uint32_t i, uint32_t round, uint32_t len)
{
	return (unsigned char)(i * 31u + round * 7u + len);
}

int main(int argc, char **argv)
{
	uint32_t len, round, i, bad = 0, total_bad = 0;
	unsigned char *buf;
	int rank, size;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 2) {
		if (!rank)
			fprintf(stderr, "run with 2 ranks\n");
		MPI_Finalize();
		return 1;
	}
	buf = malloc(MAX_LEN);
	if (!buf)
		MPI_Abort(MPI_COMM_WORLD, 1);
	for (len = 1; len <= MAX_LEN; len *= 4) {
		for (round = 0; round < ROUNDS; round++) {
			if (rank == 0) {
				for (i = 0; i < len; i++)
					buf[i] = pattern(i, round, len);
				MPI_Send(buf, (int)len, MPI_BYTE, 1, 0,
					 MPI_COMM_WORLD);
				MPI_Recv(buf, (int)len, MPI_BYTE, 1, 0,
					 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				for (i = 0; i < len; i++)
					bad += buf[i] !=
					       (unsigned char)~pattern(i, round,
								     len);
			} else {
				MPI_Recv(buf, (int)len, MPI_BYTE, 0, 0,
					 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				for (i = 0; i < len; i++) {
					bad += buf[i] != pattern(i, round, len);
					buf[i] = (unsigned char)~buf[i];
				}
				MPI_Send(buf, (int)len, MPI_BYTE, 0, 0,
					 MPI_COMM_WORLD);
			}
		}
	}
	MPI_Reduce(&bad, &total_bad, 1, MPI_UINT32_T, MPI_SUM, 0,
		   MPI_COMM_WORLD);
	if (!rank)
		printf("%s: %u bad bytes in ping-pongs of 1 B to %u B\n",
		       total_bad ? "FAIL" : "PASS", total_bad, MAX_LEN);
	free(buf);
	MPI_Finalize();
	return total_bad ? 1 : 0;
}
