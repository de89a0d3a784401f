# A bar per case, for scripts/figures.sh's figures whose bench draws no plot of its own:
# gnuplot -e "dir='tools/plots/'; in='x.tsv'; out='x.png'; title='...'; ylabel='...'" figures-bars.gp
#   in = label, value
load dir . "common.gp"
set output out
unset logscale x
set xtics norotate offset 0,0 font ",10"
set title title font ",13"
set ylabel ylabel
set yrange [0:*]
set style fill solid 0.85 border rgb "#444444"
set boxwidth 0.6
unset key
set offsets 0.5, 0.5, graph 0.1, 0
plot in using 0:2:xtic(1) with boxes lc rgb "#1f5fbf", \
     '' using 0:2:(sprintf("%.0f", $2)) with labels offset 0,1 notitle
