/* my_pe / n_pes / version / accessibility: every PE reports once. */
#include <shmem.h>
#include <shmemx.h>
#include <string.h>

#include "check.h"

int main(int argc, char **argv)
{
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    int want = argc > 1 ? atoi(argv[1]) : n;
    CHECK(n == want, "n_pes %d, expected %d", n, want);
    CHECK(me >= 0 && me < n, "my_pe %d of %d", me, n);
    CHECK(_my_pe() == me && _num_pes() == n, "deprecated queries disagree");
    int major, minor;
    shmem_info_get_version(&major, &minor);
    CHECK(major == SHMEM_MAJOR_VERSION && minor == SHMEM_MINOR_VERSION && major == 1 && minor == 5,
          "version %d.%d", major, minor);
    char name[SHMEM_MAX_NAME_LEN];
    shmem_info_get_name(name);
    CHECK(strlen(name) > 0, "empty name");
    for (int pe = 0; pe < n; pe++)
        CHECK(shmem_pe_accessible(pe), "PE %d not accessible", pe);
    CHECK(!shmem_pe_accessible(n), "PE %d accessible", n);
    int local = 0;
    CHECK(!shmem_addr_accessible(&local, 0), "a stack address is not symmetric");
    printf("hello from PE %d of %d\n", me, n);
    shmem_finalize();
    return 0;
}
