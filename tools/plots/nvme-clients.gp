# One NVMe shared by N hosts (smartio-tocs-2021 §7.4.2), from scripts/bench-nvme-clients.sh:
# gnuplot -e "dir='tools/plots/'; in='runs.tsv'; out='x.png'; qd='4'" nvme-clients.gp
#   in = clients, aggregate IOPS, fairness (slowest/fastest client), min IOPS, max IOPS
load dir . "common.gp"
set output out
unset logscale x
set xtics (1, 2, 4, 8, 16, 30) norotate font ",10"
set xrange [0:31]
set title sprintf("One NVMe, N client hosts at once: 4 KiB random reads, QD %s per client", qd) font ",13"
set xlabel "client hosts (each with its own I/O queue pair)"
set ylabel "IOPS (thousands)"
set y2label "fairness: slowest / fastest client"
set yrange [0:*]
set y2range [0:1.05]
set y2tics 0.2
set ytics nomirror
set key top right box opaque
plot in using 1:($2/1000) with linespoints pt 7 ps 1.1 lw 2 lc rgb "#1f5fbf" title "aggregate IOPS", \
     '' using 1:($4/1000):($4/1000):($5/1000) with yerrorbars pt 0 lw 1.2 lc rgb "#7f7f7f" title "per-client IOPS (min..max)", \
     '' using 1:3 axes x1y2 with linespoints pt 5 ps 0.9 dt 2 lw 1.5 lc rgb "#c0392b" title "fairness (right axis)"
