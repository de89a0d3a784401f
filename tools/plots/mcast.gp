# One NVMe read into N hosts at once (smartio-tocs-2021 §6.5, §7.4.2), from
# scripts/bench-mcast.sh:
# gnuplot -e "dir='tools/plots/'; in='runs.tsv'; out='x.png'; bytes='4096'; lat='no'" mcast.gp
#   in = hosts, multicast median us, unicast median us, multicast p25, p75, unicast p25, p75
load dir . "common.gp"
set output out
unset logscale x
set xrange [0:60]
set xtics (1, 2, 4, 8, 16, 32, 59) norotate font ",10"
set title sprintf("One NVMe read of %s bytes into N hosts: multicast vs N reads (latency model: %s)", bytes, lat) font ",13"
set xlabel "hosts that receive the data (cluster60: 7 cascaded switches)"
set ylabel "time until every host has it (µs, median; bars: quartiles)"
set yrange [0:*]
set key top left box opaque
plot in using 1:3:6:7 with yerrorlines pt 5 ps 0.9 lw 2 lc rgb "#c0392b" title "N reads, one per host (queued at once)", \
     '' using 1:2:4:5 with yerrorlines pt 7 ps 1.1 lw 2 lc rgb "#1f5fbf" title "one read into a multicast group"
