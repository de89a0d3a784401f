# The ring seed's Figs. 4a, 5, 6 and 7 (openshmem-switchless-ntb-ring §5.1-5.2) from the TSVs of
# scripts/bench-ring.sh. One script, the figure chosen by a parameter:
# gnuplot -e "dir='tools/plots/'; fig='4a'; in='fig4a.tsv'; out='x.png'; title='...'" ring.gp
#   fig '4a': in = size, raw_dma, raw_cpu, lib_neighbour, lib_far_t1, lib_far_t2 (MB/s)
#   fig '6':  in = size, then MB/s per thread count; threads = the counts as words ('1 2 4 8')
#   fig '5':  in = a prefix: in.T.tsv per thread count T (size, put_us for 3, 4, 5 hosts, then
#             get_us for 3, 4, 5 hosts); one panel per thread count, like Fig. 5(a)-(d)
#   fig '7':  in = hosts, then us per thread count (threads as for '6')
load dir . "common.gp"
set output out
colour(i) = word("#1f5fbf #c0392b #27ae60 #8e44ad #d68910 #7f7f7f", i)
if (fig eq '4a') {
    set title title font ",13"
    set xlabel "request size (bytes, log scale)"
    set ylabel "throughput (MB/s = 10^6 bytes/s, log scale)"
    set logscale y 10
    set format y "%g"
    set key top left
    plot in using 1:2:xticlabels(size_label($1)) with linespoints pt 7 ps 0.9 lw 2 lc rgb colour(1) title "raw link a -> b: ntb\\_perf, DMA engine, 1 channel", \
         '' using 1:3 with linespoints pt 6 ps 0.8 dt 3 lc rgb colour(6) title "raw link a -> b: ntb\\_perf, CPU stores", \
         '' using 1:4 with linespoints pt 5 ps 0.8 dt 2 lc rgb colour(3) title "shmem\\_putmem PE 0 -> PE 1 (neighbour)", \
         '' using 1:5 with linespoints pt 9 ps 1.0 lc rgb colour(2) title "shmem\\_putmem PE 0 -> PE 2 (two hops), 1 thread", \
         '' using 1:6 with linespoints pt 11 ps 1.0 dt 4 lc rgb colour(4) title "shmem\\_putmem PE 0 -> PE 2 (two hops), 2 threads"
}
if (fig eq '6') {
    set title title font ",13"
    set xlabel "request size (bytes, log scale)"
    set ylabel "throughput (MB/s = 10^6 bytes/s)"
    set yrange [0:*]
    set key top left
    plot for [i=1:words(threads)] in using 1:(column(i + 1)):xticlabels(size_label($1)) \
         with linespoints pt 7 ps 0.9 lc rgb colour(i) title word(threads, i) . " thread" . (word(threads, i) eq "1" ? "" : "s")
}
if (fig eq '5') {
    set terminal pngcairo size 1200,900 enhanced font "DejaVu Sans,10" linewidth 1.5
    set output out
    set multiplot layout 2,2 title title font ",12"
    set xlabel "request size (bytes, log scale)"
    set ylabel "latency (us, log scale)"
    set logscale y 10
    set format y "%g"
    set key top left
    do for [i=1:words(threads)] {
        t = word(threads, i)
        set title sprintf("(%c) %s thread%s", 96 + i, t, t eq "1" ? "" : "s")
        f = in . t . ".tsv"
        plot for [h=3:5] f using 1:(column(h - 1)):xticlabels(every_other($1)) \
             with linespoints pt 7 ps 0.8 lc rgb colour(h - 2) title sprintf("%d hosts: put + quiet", h), \
             for [h=3:5] f using 1:(column(h + 2)) with lines dt 2 lc rgb colour(h - 2) title sprintf("%d hosts: get", h)
    }
    unset multiplot
}
if (fig eq '7') {
    unset logscale x
    set title title font ",13"
    set xlabel "hosts in the ring"
    set ylabel "turn-around latency (us, mean over PEs)"
    set xrange [2.5:5.5]
    set xtics 1 norotate offset 0,0
    set yrange [0:*]
    set key top left
    plot for [i=1:words(threads)] in using 1:(column(i + 1)) \
         with linespoints pt 7 ps 1.0 lc rgb colour(i) title word(threads, i) . " thread" . (word(threads, i) eq "1" ? "" : "s")
}
