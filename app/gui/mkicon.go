//go:build ignore

// mkicon draws Parley's app icon (icon.png, 512×512): an indigo rounded square holding a
// white speech bubble with sound bars. Regenerate with
//
//	go run ./app/gui/mkicon.go -o app/gui/icon.png
package main

import (
	"flag"
	"image"
	"image/color"
	"image/png"
	"log"
	"math"
	"os"
)

func main() {
	out := flag.String("o", "icon.png", "output PNG")
	flag.Parse()
	const n, ss = 512, 4 // size, supersampling
	img := image.NewNRGBA(image.Rect(0, 0, n, n))
	top := [3]float64{0x6a, 0x74, 0xf0}
	bot := [3]float64{0x3b, 0x3f, 0xb5}
	for y := 0; y < n; y++ {
		for x := 0; x < n; x++ {
			var cov, white float64
			for sy := 0; sy < ss; sy++ {
				for sx := 0; sx < ss; sx++ {
					px := (float64(x) + (float64(sx)+0.5)/ss) / n
					py := (float64(y) + (float64(sy)+0.5)/ss) / n
					if roundRect(px, py, 0.04, 0.04, 0.96, 0.96, 0.22) {
						cov++
						if bubbleShape(px, py) && !bars(px, py) {
							white++
						}
					}
				}
			}
			cov /= ss * ss
			white /= ss * ss
			if cov == 0 {
				continue
			}
			t := float64(y) / n
			var c [3]float64
			for i := range c {
				c[i] = top[i]*(1-t) + bot[i]*t
				c[i] = c[i]*(1-white/cov) + 255*(white/cov)
			}
			img.SetNRGBA(x, y, color.NRGBA{uint8(c[0]), uint8(c[1]), uint8(c[2]), uint8(255 * cov)})
		}
	}
	f, err := os.Create(*out)
	if err != nil {
		log.Fatal(err)
	}
	if err := png.Encode(f, img); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
}

func roundRect(x, y, x0, y0, x1, y1, r float64) bool {
	if x < x0 || x > x1 || y < y0 || y > y1 {
		return false
	}
	cx := math.Max(x0+r, math.Min(x, x1-r))
	cy := math.Max(y0+r, math.Min(y, y1-r))
	return (x-cx)*(x-cx)+(y-cy)*(y-cy) <= r*r
}

// bubbleShape is a rounded speech bubble with a tail at the bottom left.
func bubbleShape(x, y float64) bool {
	if roundRect(x, y, 0.2, 0.22, 0.8, 0.7, 0.14) {
		return true
	}
	// tail: triangle (0.3,0.66) (0.44,0.66) (0.26,0.82)
	return inTri(x, y, 0.3, 0.66, 0.46, 0.66, 0.25, 0.82)
}

func inTri(x, y, ax, ay, bx, by, cx, cy float64) bool {
	s := func(px, py, qx, qy, rx, ry float64) float64 { return (px-rx)*(qy-ry) - (qx-rx)*(py-ry) }
	d1, d2, d3 := s(x, y, ax, ay, bx, by), s(x, y, bx, by, cx, cy), s(x, y, cx, cy, ax, ay)
	neg := d1 < 0 || d2 < 0 || d3 < 0
	pos := d1 > 0 || d2 > 0 || d3 > 0
	return !(neg && pos)
}

// bars are five rounded sound bars cut out of the bubble.
func bars(x, y float64) bool {
	hs := []float64{0.08, 0.16, 0.24, 0.14, 0.07}
	for i, h := range hs {
		cx := 0.34 + float64(i)*0.08
		if roundRect(x, y, cx-0.022, 0.46-h/2, cx+0.022, 0.46+h/2, 0.022) {
			return true
		}
	}
	return false
}
