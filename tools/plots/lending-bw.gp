# Device Lending: accel_drv's copies on an accelerator used locally and lent, from
# scripts/bench-lending.sh:
# gnuplot -e "dir='tools/plots/'; in='bw.tsv'; out='x.png'; size='4M'" lending-bw.gp
#   in = latency model (off/on), direction (h2d/d2h), local MB/s, lent MB/s (medians)
load dir . "common.gp"
set output out
unset logscale x
set xtics norotate offset 0,0 font ",10"
set title sprintf("accel\\_drv on accel0: its own host (local) vs a borrower (lent), %s copies", size) font ",13"
set ylabel "MB/s (median of the rounds)"
set yrange [0:*]
set style data histogram
set style histogram clustered gap 1.5
set style fill solid 0.85 border rgb "#444444"
set boxwidth 0.9
set key outside bottom center horizontal box opaque
set bmargin 7
set offsets 0, 0, graph 0.1, 0
label(m, d) = (d eq "h2d" ? "host-to-device" : "device-to-host") . "\nlatency model " . m
plot in using 3:xtic(label(strcol(1), strcol(2))) title "local" lc rgb "#1f5fbf", \
     '' using 4 title "lent" lc rgb "#e08a1e"
