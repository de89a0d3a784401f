# Device Lending, smartio-tocs-2021 Fig. 21: the latency CDF of fio 4 KiB random
# reads (QD 1, the buffer mapped and unmapped around every I/O) on a local and a lent NVMe,
# latency model on, from scripts/bench-lending.sh:
# gnuplot -e "dir='tools/plots/'; local='l.tsv'; lent='b.tsv'; out='x.png'; lmed='N'; bmed='N'" lending-fig21.gp
#   local, lent = percentile, total latency (ns); lmed, bmed = the medians (ns)
load dir . "common.gp"
set output out
set logscale x 10
set format x "%g"
set xtics norotate offset 0,0 font ",10"
set title "fio 4 KiB random reads, QD 1, dma\\_map+unmap per I/O: local vs lent NVMe (latency model on)" font ",12"
set xlabel "total latency of an I/O, map and unmap included (us, log scale)"
set ylabel "fraction of I/Os"
set yrange [0:1.02]
set xrange [*:*]
set key bottom right box opaque
set arrow 1 from lmed / 1000.0, graph 0 to lmed / 1000.0, graph 1 nohead dt 2 lc rgb "#1f5fbf"
set arrow 2 from bmed / 1000.0, graph 0 to bmed / 1000.0, graph 1 nohead dt 2 lc rgb "#e08a1e"
set label 1 sprintf("local median %.1f us", lmed / 1000.0) at lmed / 1000.0, 0.3 left offset 0.5,0 tc rgb "#1f5fbf"
set label 2 sprintf("lent median %.1f us", bmed / 1000.0) at bmed / 1000.0, 0.55 left offset 0.5,0 tc rgb "#e08a1e"
plot local using ($2 / 1000.0):($1 / 100.0) with linespoints pt 7 ps 0.8 lw 2 lc rgb "#1f5fbf" title "local NVMe", \
     lent using ($2 / 1000.0):($1 / 100.0) with linespoints pt 5 ps 0.8 lw 2 lc rgb "#e08a1e" title "lent NVMe"
