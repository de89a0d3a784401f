# intr_bench: remote-interrupt round trip next to a futex ping-pong between two processes.
# gnuplot -e "in='data.tsv'; out='x.png'; title='...'" intr.gp
# Bars of one row sit at row - 0.25, row, row + 0.25 (3 per cluster, gap 1).
# in: a header line, then one row per kind: label, min_us, median_us, p99_us
set terminal pngcairo size 900,560 enhanced font "DejaVu Sans,11" linewidth 1.5
set datafile separator "\t"
set output out
set title title font ",13"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set ylabel "round trip (µs, log scale)"
set logscale y 10
set yrange [0.1:*]
set format y "%g"
set key autotitle columnheader
set grid ytics lc rgb "#dddddd"
set key top left box opaque
plot in using 2:xticlabels(1) lc rgb "#7fb3e6", \
     '' using 3 lc rgb "#1f5fbf", \
     '' using 4 lc rgb "#c0392b", \
     '' using ($0 - 0.25):2:(sprintf("%.1f", $2)) with labels offset 0,0.6 font ",9" notitle, \
     '' using 0:3:(sprintf("%.1f", $3)) with labels offset 0,0.7 font ",9" notitle, \
     '' using ($0 + 0.25):4:(sprintf("%.1f", $4)) with labels offset 0,0.7 font ",9" notitle
