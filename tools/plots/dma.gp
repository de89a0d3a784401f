# dma_bench: DMA write (local -> remote) and read (remote -> local) bandwidth against block
# size, like device-lending-2016 Fig. 4a. One or more runs: files and their labels.
# gnuplot -e "files='a.tsv b.tsv'; labels='lat-off lat-on'; out='x.png'; title='...'" dma.gp
# in: block, write_mbps, read_mbps; labels are words (use '_' for a space)
load dir . "common.gp"
set output out
set title title font ",13"
set xlabel "DMA block size (bytes, log scale)"
set ylabel "bandwidth (GB/s = 10^9 bytes/s)"
set yrange [0:*]
set key top left
if (words(files) > 1) {
    # runs of different scale (latency model off and on): log axis, legend below
    set logscale y 10
    set yrange [*:*]
    set format y "%g"
    set ylabel "bandwidth (GB/s = 10^9 bytes/s, log scale)"
    set bmargin 9
    set key at screen 0.5, 0.015 center bottom horizontal maxrows 2
}
lab(i) = system(sprintf("printf '%%s' '%s' | tr _ ' '", word(labels, i)))
suffix(i) = words(files) > 1 ? " (" . lab(i) . ")" : ""
plot for [i=1:words(files)] word(files, i) using 1:($2 / 1000):xticlabels(size_label($1)) \
         with linespoints pt 7 ps 0.9 dt i lc rgb "#1f5fbf" title "write, local -> remote" . suffix(i), \
     for [i=1:words(files)] word(files, i) using 1:($3 / 1000) \
         with linespoints pt 5 ps 0.9 dt i lc rgb "#c0392b" title "read, remote -> local" . suffix(i)
