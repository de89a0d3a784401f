#!/usr/bin/env python3
"""Seed inputs for fuzz/sisci_fuzz.c: runs of calls that succeed, so that the fuzzer starts
from live handles of every kind. Usage: fuzz/sisci_seeds.py DIR (writes DIR/seed-*)."""
import struct
import sys

def rec(op, s1=0, s2=0, s3=0, a=0, b=0, c=0):
    return struct.pack("<BBBBIII", op, s1, s2, s3, a, b, c)

SZ64K, SZ4K, SZ256 = 0x30010000, 0x30001000, 0x30000100
B_NODE = 1  # node_of(1) = 8: host b, where the harness runs
seeds = {
    "segments": [
        rec(0, s3=0),                                  # open -> 0
        rec(2, 0, s3=1, a=10, b=SZ64K),                # segment 10, 64 KiB -> 1
        rec(4, 1), rec(5, 1),                          # prepare, available on adapter 0
        rec(7, 0, s3=2, a=10, b=B_NODE),               # connect to it -> 2
        rec(9, 2, s3=3),                               # map remote -> 3
        rec(10, 1, s3=4),                              # map local -> 4
        rec(12, 3, s3=5), rec(14, 5),                  # sequence -> 5, start
        rec(39, 3, a=0x5a, b=100, c=200),              # store and load through the map
        rec(16, 3, 5, a=0, b=SZ256, c=0x40),           # SCIMemCpy, checked
        rec(16, 3, 5, a=0, b=SZ256, c=0x50),           # ... and back
        rec(15, 5),                                    # check
        rec(6, 1), rec(11, 3), rec(8, 2),              # unavailable, unmap, disconnect
    ],
    "dma": [
        rec(0, s3=0),
        rec(2, 0, s3=1, a=11, b=SZ64K), rec(4, 1), rec(5, 1),
        rec(7, 0, s3=2, a=11, b=B_NODE),
        rec(17, 0, s3=6, a=4),                         # DMA queue, 4 entries -> 6
        rec(19, 6, 1, 2, a=0, b=SZ4K, c=0x1000),       # 4 KiB, waited for
        rec(19, 6, 1, 2, a=0, b=SZ4K, c=0x800),        # a read, not waited for
        rec(21, 6, b=3),                               # wait
        rec(20, 6, 1, 2, a=3, b=SZ4K, c=0),            # a vector
        rec(21, 6, b=3), rec(22, 6), rec(18, 6),       # wait, abort, remove
    ],
    "interrupts": [
        rec(0, s3=0),
        rec(23, 0, s3=7),                              # interrupt -> 7
        rec(25, 0, 7, s3=8, b=B_NODE),                 # connect to it -> 8
        rec(27, 8), rec(28, 7, b=1),                   # trigger, wait
        rec(29, 0, s3=9, a=77, c=1),                   # data interrupt 77 -> 9
        rec(30, 0, s3=10, a=77, b=B_NODE),             # connect -> 10
        rec(31, 10, a=1, b=16), rec(32, 9, a=3, b=0x40),  # trigger with 16 bytes, wait
        rec(31, 10, a=1, b=200),                       # too large
        rec(26, 8), rec(24, 7),
    ],
    "smartio": [
        rec(0, s3=0),
        rec(33, 0, s3=11, a=1),                        # borrow nvme0 -> 11
        rec(35, 0, 11, s3=12, a=0, b=1, c=0x8000),     # its BAR 0 -> 12
        rec(9, 12, s3=13, b=SZ4K, c=0x400),            # map 4 KiB of it -> 13
        rec(35, 0, 11, s3=14, a=3, b=1, c=0x100),      # device memory 3, shared -> 14
        rec(35, 0, 11, s3=15, a=0, b=1, c=0x80),       # private -> 15
        rec(2, 0, s3=1, a=12, b=SZ64K), rec(4, 1),
        rec(36, 1, 11, a=1), rec(36, 14, 11, a=0),     # map both for the device
        rec(37, 1, 11, a=1), rec(37, 14, 11, a=0),     # and unmap
        rec(2, 0, s3=16, a=13, b=SZ64K, c=0x200),      # an empty segment -> 16
        rec(38, 16, a=0x2001, b=0, c=SZ64K),           # the harness's memory registered
        rec(39, 13, a=0, b=0, c=4, ), rec(11, 13),
        rec(34, 11),                                   # return: busy, its memory is connected
    ],
    "freed": [
        rec(0, s3=0), rec(1, 0),                       # open, close
        rec(2, 0, s3=1, a=1, b=SZ4K),                  # on the closed descriptor
        rec(0, s3=2), rec(2, 2, s3=3, a=1, b=SZ4K), rec(3, 3), rec(3, 3),  # removed twice
        rec(9, 3, s3=4), rec(12, 2, s3=5), rec(19, 2, 3, 2),               # wrong kinds
    ],
}
for name, recs in seeds.items():
    with open(f"{sys.argv[1]}/seed-{name}", "wb") as f:
        f.write(b"".join(recs))
