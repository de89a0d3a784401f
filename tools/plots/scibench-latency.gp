# scibench: time per copy (latency) against copy size, remote and local segments.
# gnuplot -e "in='data.tsv'; out='x.png'; title='...'" scibench-latency.gp
# in: size, 4 x mbps, store_remote_ns, store_local_ns, load_remote_ns, load_local_ns
load dir . "common.gp"
set output out
set title title font ",13"
set xlabel "copy size (bytes, log scale)"
set ylabel "time per copy (ns, log scale)"
set logscale y 10
set format y "%g"
plot in using 1:6:xticlabels(every_other($1)) with linespoints pt 7 ps 0.8 lc rgb "#1f5fbf" title "store, remote segment", \
     '' using 1:7 with linespoints pt 5 ps 0.7 dt 2 lc rgb "#1f5fbf" title "store, local segment", \
     '' using 1:8 with linespoints pt 7 ps 0.8 lc rgb "#c0392b" title "load, remote segment", \
     '' using 1:9 with linespoints pt 5 ps 0.7 dt 2 lc rgb "#c0392b" title "load, local segment"
