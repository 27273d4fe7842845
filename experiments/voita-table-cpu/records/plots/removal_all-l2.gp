set terminal pngcairo noenhanced size 1160,440 font ',10'
set output 'experiments/voita-table-cpu/records/plots/removal_all-l2.png'
set multiplot layout 1,3 title 'Heads removed in all-l2 (colour: removal step; yellow: kept)'
set cbrange [0:1321]
set palette defined (0 'black', 0.5 'red', 0.9074943224829675 'orange', 1 'yellow')
set datafile missing 'NaN'
set xlabel 'head'
set ylabel 'layer'
set tics out
set xtics 1
set ytics 1
unset key
set title 'enc_self'
set xrange [-0.5:7.5]
set yrange [-0.5:5.5]
plot 'experiments/voita-table-cpu/records/plots/removal_all-l2_0.dat' matrix with image
set title 'dec_self'
set xrange [-0.5:7.5]
set yrange [-0.5:5.5]
plot 'experiments/voita-table-cpu/records/plots/removal_all-l2_1.dat' matrix with image
set title 'enc_dec'
set xrange [-0.5:7.5]
set yrange [-0.5:5.5]
plot 'experiments/voita-table-cpu/records/plots/removal_all-l2_2.dat' matrix with image
unset multiplot
