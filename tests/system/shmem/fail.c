/* Failure paths. "exit": PE 1 exits with status 3 while the others sit in a barrier: oshrun
 * must end them and return 3. "global": PE 1 calls shmem_global_exit(4) while the others sit
 * in a barrier: every PE leaves with 4. */
#include <shmem.h>
#include <string.h>

#include "check.h"

int main(int argc, char **argv)
{
    shmem_init();
    const char *mode = argc > 1 ? argv[1] : "exit";
    if (shmem_my_pe() == 1) {
        if (strcmp(mode, "global") == 0)
            shmem_global_exit(4);
        exit(3);
    }
    shmem_barrier_all(); /* never completes */
    return 0;
}
