/*
 * Every environment variable libshmem and oshrelay read: one table, from which env.c parses
 * and checks them and SHMEM_INFO's text comes (docs/openshmem.md lists the same, checked by
 * tests/system/test_shmem.sh). Each is SHMEM_NAME, also read as SMA_NAME (older programs' spelling).
 *
 * SHM_ENV(ID, NAME, KIND, DEFAULT, MIN, MAX, WHO, HELP)
 *   KIND     SHM_KIND_SIZE: bytes, k/m/g/t suffixes (binary), fractions; SHM_KIND_NUM: an
 *            integer; SHM_KIND_FLAG: on/off (1/0, yes/no, true/false); SHM_KIND_WORD: one of
 *            the words in DEFAULT's place of the choices ("a|b|c", the first the default);
 *            SHM_KIND_TEXT: any text
 *   DEFAULT  as text (NUM/SIZE/FLAG), or the choices (WORD); "" where the code decides
 *   MIN/MAX  bounds of NUM and SIZE (a caller may narrow them: shm_env_num_in)
 *   WHO      SHM_FOR_USER (for users, in SHMEM_INFO), SHM_FOR_LAUNCHER (set by oshrun),
 *            SHM_FOR_TEST (for tests)
 */
#ifndef NTBLEND_SHMEM_ENV_DEFS_H
#define NTBLEND_SHMEM_ENV_DEFS_H

#define SHM_ENV_TABLE(X)                                                                      \
    X(SYMMETRIC_SIZE, "SYMMETRIC_SIZE", SHM_KIND_SIZE, "64M", 1, 1LL << 40, SHM_FOR_USER,   \
      "symmetric heap per PE (default 64M; k/m/g/t, fractions: 3.1M)")                        \
    X(VERSION, "VERSION", SHM_KIND_FLAG, "0", 0, 1, SHM_FOR_USER,                              \
      "print the library version at start-up")                                               \
    X(INFO, "INFO", SHM_KIND_FLAG, "0", 0, 1, SHM_FOR_USER, "print this text at start-up")     \
    X(DEBUG, "DEBUG", SHM_KIND_FLAG, "0", 0, 1, SHM_FOR_USER, "debugging messages on stderr")  \
    X(BOOTSTRAP_TIMEOUT, "BOOTSTRAP_TIMEOUT", SHM_KIND_NUM, "60000", 0, 1 << 30, SHM_FOR_USER, \
      "ms to wait for the other PEs' heaps (default 60000)")                                  \
    X(ATOMICS, "ATOMICS", SHM_KIND_WORD, "hardware|software", 0, 0, SHM_FOR_USER,              \
      "hardware (in place, default) or software (the target's node)")                         \
    X(RING_THREADS, "RING_THREADS", SHM_KIND_NUM, "2", 1, 8, SHM_FOR_USER,                     \
      "transfer threads per adapter of each node (1-8, default 2)")                           \
    X(RING_CHUNK, "RING_CHUNK", SHM_KIND_SIZE, "", 4096, 1 << 20, SHM_FOR_USER,                \
      "bytes per forwarded message, 4k-1m (default 512k or 256k, as the adapters' LUTs "     \
      "allow)")                                                                               \
    X(RING_FAILOVER, "RING_FAILOVER", SHM_KIND_FLAG, "0", 0, 1, SHM_FOR_USER,                  \
      "on: a ring job survives a link going down (traffic goes the other way round; every "  \
      "operation on another host is a message through the nodes); off (default)")            \
    X(DMA_MIN, "DMA_MIN", SHM_KIND_SIZE, "32k", 1, 1LL << 40, SHM_FOR_USER,                    \
      "forwarded hops of at least this size use DMA (default 32k; off: the CPU copies all)")  \
    X(COPY_HELPER, "COPY_HELPER", SHM_KIND_WORD, "1|0|slow", 0, 0, SHM_FOR_USER,               \
      "0: large puts and gets to mapped PEs by one thread (default 1: a helper thread "      \
      "copies half, with no more PEs than CPUs, when timing shows that the two copy faster " \
      "than one; slow: a helper that dawdles, for tests)")                                    \
    X(PROFILE, "PROFILE", SHM_KIND_WORD, "off|on|json|0|1", 0, 0, SHM_FOR_USER,                \
      "on: time every routed put's stages on a ring (wait, stage, dma, publish, doorbell, "  \
      "relay, deliver, ack, quiet) and print each PE's sums at shmem_finalize on stderr; "    \
      "json: the same as one JSON line; off (default): nothing is timed")                     \
    X(JOB, "JOB", SHM_KIND_NUM, "", 0, 0x7fffffff, SHM_FOR_LAUNCHER, "the job's id")           \
    X(PE, "PE", SHM_KIND_NUM, "0", 0, 4095, SHM_FOR_LAUNCHER, "this PE's number")              \
    X(NPES, "NPES", SHM_KIND_NUM, "1", 1, 4096, SHM_FOR_LAUNCHER, "the job's PEs")             \
    X(PE_NODES, "PE_NODES", SHM_KIND_TEXT, "", 0, 0, SHM_FOR_LAUNCHER,                         \
      "each PE's node id, comma-separated")                                                   \
    X(LAUNCHER_PID, "LAUNCHER_PID", SHM_KIND_NUM, "0", 0, 0x7fffffff, SHM_FOR_LAUNCHER,        \
      "oshrun's process: the job ends when it is gone")                                       \
    X(RELAY_SLOW_PE, "RELAY_SLOW_PE", SHM_KIND_NUM, "-1", -1, 4095, SHM_FOR_TEST,              \
      "the ring's nodes hold every routed put they deliver to this PE for 2 ms")             \
    X(RELAY_HOLD, "RELAY_HOLD", SHM_KIND_TEXT, "", 0, 0, SHM_FOR_TEST,                         \
      "S:T, with SHMEM_RING_FAILOVER=on: PE T's node leaves PE S's requests from the next "   \
      "host on unread, from S's first put of a whole chunk on, until that link goes down")

#endif
