package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The curves watched for growth. The replica's are those of replica 0,
// which the faults never kill or pause when there are others (a process
// restarted every minute shows no leak); PostgreSQL's is its client
// connections from every replica.
var curves = []string{"rss_mb", "goroutines", "open_fds", "pg_conns"}

// heap_mb (the Go heap in use) is shown beside them, not judged: it swings
// with every collection.
var widths = map[string]int{"rss_mb": 8, "heap_mb": 8, "goroutines": 11, "open_fds": 9, "pg_conns": 9}

type sample struct {
	at     time.Duration
	values map[string]float64
	loaded bool // taken while the agents ran
}

type sampler struct {
	s       *soak
	mu      sync.Mutex
	samples []sample
}

// metric reads one Prometheus value from a metrics page.
func metric(page, name string) (float64, bool) {
	sc := bufio.NewScanner(strings.NewReader(page))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

func (sm *sampler) take(ctx context.Context, loaded bool) {
	values := map[string]float64{}
	r := sm.s.replicas[0]
	mctx, mcancel := context.WithTimeout(ctx, 5*time.Second)
	defer mcancel()
	req, _ := http.NewRequestWithContext(mctx, http.MethodGet, "http://"+r.metrics+"/metrics", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		resp.Body.Close()
		page := string(b)
		if v, ok := metric(page, "process_resident_memory_bytes"); ok {
			values["rss_mb"] = v / (1 << 20)
		}
		if v, ok := metric(page, "go_memstats_heap_inuse_bytes"); ok {
			values["heap_mb"] = v / (1 << 20)
		}
		if v, ok := metric(page, "go_goroutines"); ok {
			values["goroutines"] = v
		}
		if v, ok := metric(page, "process_open_fds"); ok {
			values["open_fds"] = v
		}
	}
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(qctx, sm.s.pg.url()); err == nil {
		var n int
		if conn.QueryRow(qctx, "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()").Scan(&n) == nil {
			values["pg_conns"] = float64(n)
		}
		conn.Close(qctx)
	}
	sm.mu.Lock()
	sm.samples = append(sm.samples, sample{at: time.Since(sm.s.rep.start), values: values, loaded: loaded})
	sm.mu.Unlock()
}

// growth checks every curve: its level at the end of the load (the
// median of the last three loaded samples) may be at most 20 % over its
// level at the end of the first window (the highest sample in the second
// half of that window), plus a small absolute slack for small counts.
func (sm *sampler) growth(window time.Duration) []string {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	slack := map[string]float64{"rss_mb": 8, "goroutines": 25, "open_fds": 10, "pg_conns": 4}
	var out []string
	for _, c := range curves {
		var base []float64
		var end []float64
		for _, smp := range sm.samples {
			v, ok := smp.values[c]
			if !ok || !smp.loaded {
				continue
			}
			if smp.at >= window/2 && smp.at <= window {
				base = append(base, v)
			}
			if smp.at > window {
				end = append(end, v)
			}
		}
		if len(base) == 0 || len(end) < 3 {
			out = append(out, fmt.Sprintf("%s: too few samples to judge (%d in the first window, %d after)", c, len(base), len(end)))
			continue
		}
		level := slices.Max(base)
		last := slices.Clone(end[len(end)-3:])
		slices.Sort(last)
		if final := last[1]; final > level*1.2+slack[c] {
			out = append(out, fmt.Sprintf("%s grew from %.1f (end of the first %s) to %.1f at the end (> 20 %% + %.0f)", c, level, window, final, slack[c]))
		}
	}
	return out
}

func (sm *sampler) writeTable(w io.Writer) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	cols := []string{"rss_mb", "heap_mb", "goroutines", "open_fds", "pg_conns"}
	fmt.Fprintf(w, "%8s", "t")
	for _, c := range cols {
		fmt.Fprintf(w, " %*s", widths[c], c)
	}
	fmt.Fprintln(w)
	for _, smp := range sm.samples {
		fmt.Fprintf(w, "%8s", smp.at.Round(time.Second))
		for _, c := range cols {
			if v, ok := smp.values[c]; ok {
				fmt.Fprintf(w, " %*.1f", widths[c], v)
			} else {
				fmt.Fprintf(w, " %*s", widths[c], "-")
			}
		}
		if !smp.loaded {
			fmt.Fprint(w, "  (after the load)")
		}
		fmt.Fprintln(w)
	}
}

// plot writes a PNG: latency p50/p99 of the acknowledged operations per
// bucket, and replica 0's memory and goroutines, over time.
func (sm *sampler) plot(path string, rep *report, bucket time.Duration, events []faultEvent) error {
	rep.mu.Lock()
	tl := slices.Clone(rep.timeline)
	rep.mu.Unlock()
	byBucket := map[int][]time.Duration{}
	for _, s := range tl {
		b := int(s.at / bucket)
		byBucket[b] = append(byBucket[b], s.lat)
	}
	var p50, p99 plotter.XYs
	for b := 0; b <= int(time.Since(rep.start)/bucket); b++ {
		l := byBucket[b]
		if len(l) == 0 {
			continue
		}
		slices.Sort(l)
		x := (time.Duration(b)*bucket + bucket/2).Seconds()
		p50 = append(p50, plotter.XY{X: x, Y: float64(percentile(l, 0.5).Milliseconds())})
		p99 = append(p99, plotter.XY{X: x, Y: float64(percentile(l, 0.99).Milliseconds())})
	}
	lat := plot.New()
	lat.Title.Text = "latency of acknowledged operations (retries included)"
	lat.X.Label.Text = "s"
	lat.Y.Label.Text = "ms"
	if err := plotutil.AddLines(lat, "p50", p50, "p99", p99); err != nil {
		return err
	}
	sm.mu.Lock()
	var rss, heap, gor plotter.XYs
	for _, smp := range sm.samples {
		if v, ok := smp.values["rss_mb"]; ok {
			rss = append(rss, plotter.XY{X: smp.at.Seconds(), Y: v})
		}
		if v, ok := smp.values["heap_mb"]; ok {
			heap = append(heap, plotter.XY{X: smp.at.Seconds(), Y: v})
		}
		if v, ok := smp.values["goroutines"]; ok {
			gor = append(gor, plotter.XY{X: smp.at.Seconds(), Y: v})
		}
	}
	sm.mu.Unlock()
	mem := plot.New()
	mem.Title.Text = "replica 0: RSS and Go heap in use (MB), goroutines"
	mem.X.Label.Text = "s"
	if err := plotutil.AddLinePoints(mem, "RSS MB", rss, "heap MB", heap, "goroutines", gor); err != nil {
		return err
	}
	// Faults as marks on the time axis of both.
	var marks plotter.XYs
	for _, e := range events {
		marks = append(marks, plotter.XY{X: e.at.Seconds(), Y: 0})
	}
	if len(marks) > 0 {
		for _, p := range []*plot.Plot{lat, mem} {
			sc, err := plotter.NewScatter(marks)
			if err != nil {
				return err
			}
			sc.GlyphStyle.Shape = draw.PyramidGlyph{}
			sc.GlyphStyle.Radius = vg.Points(4)
			p.Add(sc)
			p.Legend.Add("faults (kill, restart, pause)", sc)
		}
	}
	lat.Legend.Top, mem.Legend.Top = true, true
	img := vgimg.New(vg.Points(800), vg.Points(600))
	dc := draw.New(img)
	t := draw.Tiles{Rows: 2, Cols: 1, PadX: vg.Millimeter, PadY: vg.Millimeter * 3, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8)}
	plots := [][]*plot.Plot{{lat}, {mem}}
	canvases := plot.Align(plots, t, dc)
	lat.Draw(canvases[0][0])
	mem.Draw(canvases[1][0])
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
