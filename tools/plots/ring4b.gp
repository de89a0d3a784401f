# The ring seed's Fig. 4b (openshmem-switchless-ntb-ring §5.1): where a routed put's time goes,
# as stacked bars per put size, in microseconds per put (left) and in % of its total (right).
# scripts/bench-ring.sh fig4b writes the data:
# gnuplot -e "dir='tools/plots/'; in='fig4b.tsv'; out='fig4b.png'; title='...'" ring4b.gp
#   in = size label, then us per put of: wait stage dma publish doorbell relay deliver ack quiet
load dir . "common.gp"
set terminal pngcairo size 1300,620 enhanced font "DejaVu Sans,11" linewidth 1.5
set output out
unset logscale x
set xtics norotate offset 0,0 font ",10"
set style data histograms
set style histogram rowstacked
set style fill solid 0.9 border rgb "#444444"
set boxwidth 0.65
set key outside right top vertical box opaque font ",10"
set yrange [0:*]
colors = "#1f5fbf #6fa8dc #e69138 #f6b26b #cc0000 #8e7cc3 #38761d #93c47d #999999"
set multiplot layout 1,2 title title font ",13"
set title "us per put (its chunks' stages added)"
set ylabel "us"
unset key
plot for [i=2:10] in using i:xtic(1) title columnheader(i) lc rgb word(colors, i - 1)
set title "% of the put's total"
set ylabel "%"
set yrange [0:100]
set key outside right top vertical box opaque font ",10"
plot for [i=2:10] in using (100 * column(i) / (sum [j=2:10] column(j))):xtic(1) title columnheader(i) \
     lc rgb word(colors, i - 1)
unset multiplot
