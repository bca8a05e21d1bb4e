package main

import (
	"fmt"
	"image/color"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var sysColor = map[string]color.Color{
	"writ": color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"etcd": color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"kv":   color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
}

// chart draws spend and mint throughput and p99 by concurrency, one line
// per system, on a log-scaled concurrency axis.
func (r *Report) chart(path string) error {
	type panel struct {
		title, ylabel string
		get           func(*SpendRun) float64
	}
	panels := [][]panel{
		{{"spend throughput", "spends/s", func(x *SpendRun) float64 { return x.Spend.PerSec }},
			{"spend p99 latency", "ms", func(x *SpendRun) float64 { return x.Spend.P99Ms }}},
		{{"mint throughput", "mints/s", func(x *SpendRun) float64 { return x.Mint.PerSec }},
			{"mint p99 latency", "ms", func(x *SpendRun) float64 { return x.Mint.P99Ms }}},
	}
	var ticks []plot.Tick
	for _, c := range r.Params.Conc {
		ticks = append(ticks, plot.Tick{Value: float64(c), Label: fmt.Sprint(c)})
	}
	plots := make([][]*plot.Plot, len(panels))
	for i, row := range panels {
		plots[i] = make([]*plot.Plot, len(row))
		for j, pn := range row {
			p := plot.New()
			p.Title.Text = pn.title
			p.X.Label.Text = "concurrency"
			p.Y.Label.Text = pn.ylabel
			p.X.Scale = plot.LogScale{}
			p.X.Tick.Marker = plot.ConstantTicks(ticks)
			p.Legend.Top = true
			p.Legend.Left = true
			p.Add(plotter.NewGrid())
			for _, sys := range []string{"writ", "etcd", "kv"} {
				var pts plotter.XYs
				for _, c := range r.Params.Conc {
					if run := r.run(sys, c); run != nil {
						pts = append(pts, plotter.XY{X: float64(c), Y: pn.get(run)})
					}
				}
				if len(pts) == 0 {
					continue
				}
				l, s, err := plotter.NewLinePoints(pts)
				if err != nil {
					return err
				}
				l.Color, s.Color = sysColor[sys], sysColor[sys]
				l.Width = vg.Points(2)
				p.Add(l, s)
				p.Legend.Add(sys, l, s)
			}
			p.Y.Min = 0
			plots[i][j] = p
		}
	}
	img := vgimg.New(vg.Points(900), vg.Points(640))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 2, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		for j := range plots[i] {
			plots[i][j].Draw(canvases[i][j])
		}
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	defer out.Close()
	_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(out)
	return err
}
