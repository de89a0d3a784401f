# smartio-tocs-2021 Fig. 31(b): a lent accelerator's DMA with the lender's IOMMU off (peer to
# peer inside the expansion chassis) and on (through the lender's root complex), from
# scripts/bench-lending.sh iommu:
# gnuplot -e "dir='tools/plots/'; in='iommu.tsv'; out='x.png'; size='4M'" lending-iommu.gp
#   in = direction (reads/writes), MB/s with the IOMMU off, on (medians)
load dir . "common.gp"
set output out
unset logscale x
set xtics norotate offset 0,0 font ",10"
set title sprintf("Lent accelerator, %s DMA copies: the lender's IOMMU off and on", size) font ",13"
set ylabel "MB/s (median of the rounds)"
set yrange [0:*]
set style data histogram
set style histogram clustered gap 1.5
set style fill solid 0.85 border rgb "#444444"
set boxwidth 0.9
set key outside bottom center horizontal box opaque
set bmargin 6
set offsets 0, 0, graph 0.1, 0
plot in using 2:xtic(strcol(1) eq "reads" ? "DMA reads (host-to-device)" : "DMA writes (device-to-host)") title "no IOMMU (peer to peer)" lc rgb "#1f5fbf", \
     '' using 3 title "IOMMU on the lender" lc rgb "#e08a1e"
