# smartio-tocs-2021 Fig. 23(c): a lent accelerator's DMA throughput back to back and through a
# cluster switch (one more hop) vs transfer size, from scripts/bench-lending.sh fig23:
# gnuplot -e "dir='tools/plots/'; in='fig23.tsv'; out='x.png'" lending-fig23.gp
#   in = size, b2b reads, switch reads, b2b writes, switch writes (MB/s, medians)
load dir . "common.gp"
set output out
set multiplot layout 1,2 title "Lent accelerator: back to back vs one more hop (cluster switch)" font ",13"
unset logscale x
set xlabel "transfer size"
set ylabel "MB/s (median of the rounds)"
set yrange [0:*]
set key bottom right
set title "DMA writes (device-to-host)"
plot in using 0:4:xtic(1) with linespoints lw 2 title "back to back", \
     '' using 0:5 with linespoints lw 2 title "cluster switch"
set title "DMA reads (host-to-device)"
plot in using 0:2:xtic(1) with linespoints lw 2 title "back to back", \
     '' using 0:3 with linespoints lw 2 title "cluster switch"
unset multiplot
