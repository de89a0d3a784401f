# scibench: bandwidth of CPU stores into and loads from a remote segment next to a local one.
# gnuplot -e "in='data.tsv'; out='x.png'; title='...'" scibench.gp
# in: size, store_remote_mbps, store_local_mbps, load_remote_mbps, load_local_mbps (+ ns columns)
load dir . "common.gp"
set output out
set multiplot layout 1,2 title title font ",13"
set xlabel "copy size (bytes, log scale)"
set ylabel "bandwidth (GB/s = 10^9 bytes/s, log scale)"
set logscale y 10
set format y "%g"
set key bottom right
set title "store: memcpy into the segment"
plot in using 1:($2 / 1000):xticlabels(every_other($1)) with linespoints pt 7 ps 0.8 lc rgb "#1f5fbf" title "remote segment", \
     '' using 1:($3 / 1000) with linespoints pt 5 ps 0.7 dt 2 lc rgb "#7f7f7f" title "local segment"
set title "load: memcpy out of the segment"
plot in using 1:($4 / 1000):xticlabels(every_other($1)) with linespoints pt 7 ps 0.8 lc rgb "#c0392b" title "remote segment", \
     '' using 1:($5 / 1000) with linespoints pt 5 ps 0.7 dt 2 lc rgb "#7f7f7f" title "local segment"
unset multiplot
