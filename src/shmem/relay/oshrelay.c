/*
 * oshrelay: the node of one host in an OpenSHMEM job whose PEs cannot all reach each other
 * directly (a switchless ring), or that does AMOs in software (SHMEM_ATOMICS=software). oshrun
 * starts one on every host of the fabric with the job's environment and ends it after the
 * PEs; one that the job does not need exits at once. See src/shmem/relay.c.
 */
#include <stdio.h>
#include <string.h>

int shmemi_relay_main(void);
int shmemi_check_main(void);

int main(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        puts("usage: oshrelay [--check]   (started by oshrun on every host of the fabric)\n"
             "Forwards an OpenSHMEM job's traffic between hosts that do not reach each other\n"
             "directly (a switchless ring) and does software atomics for its host's PEs.\n"
             "Reads SHMEM_JOB, SHMEM_NPES, SHMEM_PE_NODES, SHMEM_SYMMETRIC_SIZE,\n"
             "SHMEM_RING_THREADS, SHMEM_RING_CHUNK, SHMEM_ATOMICS and SHMEM_LAUNCHER_PID.\n"
             "--check: only check that environment and the placement, as the PEs will.");
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "--check")) /* oshrun, before it starts the job */
        return shmemi_check_main();
    return shmemi_relay_main();
}
