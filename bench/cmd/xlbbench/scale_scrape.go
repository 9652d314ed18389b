package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/xlbnet/xlb/pkg/netns"
)

// scaleMetrics is the daemon's metrics_listen, on the appliance
// namespace's loopback.
const scaleMetrics = "127.0.0.1:9190"

// scrapeAccept is what a Prometheus server (2.x and 3.x, without native
// histograms) asks for; it also asks for gzip, and so does the harness.
const scrapeAccept = "application/openmetrics-text;version=1.0.0;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1"

// defaultScrapes are the queries scraped when --scrape is not given: the
// whole endpoint, and everything but the per-(rule, backend) families.
var defaultScrapes = []string{"", "scope=appliance&scope=queue&scope=rule"}

// Scrape is one query of the metrics endpoint, scraped --repeat times as
// a Prometheus server does (Accept as it sends it, gzip).
type Scrape struct {
	Query string    `json:"query"`
	Sec   float64   `json:"median_sec"`
	All   []float64 `json:"all_sec"`
	// WireBytes is the body as sent (gzip), Bytes the text it holds,
	// Series its sample lines.
	WireBytes int    `json:"wire_bytes"`
	Bytes     int    `json:"bytes"`
	Series    int    `json:"series"`
	Format    string `json:"content_type"`
	// DaemonCPUSec is the daemon's CPU time (all threads) per scrape, the
	// median over the repeats: the scrape's cost beside what the idle
	// daemon spends meanwhile (a few ms a second).
	DaemonCPUSec float64 `json:"daemon_cpu_sec"`
	// The daemon's RSS before the scrapes and after them, and its peak
	// (VmHWM, reset before them) while they ran.
	RSSBeforeMiB  float64 `json:"rss_before_mib"`
	DaemonPeakMiB float64 `json:"daemon_peak_rss_mib"`
	RSSAfterMiB   float64 `json:"rss_after_mib"`
}

// scrapeClient is an HTTP client whose connections are opened in the
// namespace ns (the daemon listens on that namespace's loopback).
func scrapeClient(ns *netns.NS) *http.Client {
	var d net.Dialer
	tr := &http.Transport{
		DisableCompression: true, // the harness asks for gzip itself, to count the bytes sent
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := ns.Do(func() error {
				var err error
				c, err = d.DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
	}
	return &http.Client{Transport: tr, Timeout: 5 * time.Minute}
}

// scrapeOnce GETs /metrics?query and returns its wall time (until the
// last byte), the bytes sent and their text, and the sample lines; save
// (if not nil) gets the text.
func scrapeOnce(ctx context.Context, c *http.Client, query string, save io.Writer) (d time.Duration, wire, text, series int, format string, err error) {
	url := "http://" + scaleMetrics + "/metrics"
	if query != "" {
		url += "?" + query
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, 0, 0, "", err
	}
	req.Header.Set("Accept", scrapeAccept)
	req.Header.Set("Accept-Encoding", "gzip")
	t0 := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, 0, 0, "", fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	d = time.Since(t0)
	if err != nil {
		return d, 0, 0, 0, "", fmt.Errorf("scrape %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return d, 0, 0, 0, "", fmt.Errorf("scrape %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	var r io.Reader = bytes.NewReader(body)
	if resp.Header.Get("Content-Encoding") == "gzip" {
		if r, err = gzip.NewReader(r); err != nil {
			return d, 0, 0, 0, "", fmt.Errorf("scrape %s: %w", url, err)
		}
	}
	if save != nil {
		r = io.TeeReader(r, save)
	}
	text, series, err = countSeries(r)
	if err != nil {
		return d, 0, 0, 0, "", fmt.Errorf("scrape %s: %w", url, err)
	}
	return d, len(body), text, series, resp.Header.Get("Content-Type"), nil
}

// countSeries reads a text exposition and returns its bytes (each line
// with its newline) and its sample lines (neither a comment nor empty).
func countSeries(r io.Reader) (n, series int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Bytes()
		n += len(l) + 1
		if len(l) > 0 && l[0] != '#' {
			series++
		}
	}
	return n, series, sc.Err()
}

// measureScrapes scrapes each of o.scrapes o.repeat times, with the
// daemon's CPU and peak RSS around them.
func measureScrapes(ctx context.Context, o scaleOptions, app string, pid int, progress func(string, ...any)) ([]Scrape, error) {
	ns, err := netns.Open(app)
	if err != nil {
		return nil, err
	}
	c := scrapeClient(ns)
	defer c.CloseIdleConnections()
	var out []Scrape
	for _, q := range o.scrapes {
		s := Scrape{Query: q}
		if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
			return nil, fmt.Errorf("reset the daemon's peak RSS: %w", err)
		}
		if s.RSSBeforeMiB, _, err = rssMiB(pid); err != nil {
			return nil, err
		}
		var cpus []float64
		for i := range o.repeat {
			var save io.Writer
			if o.scrapeSave != "" && i == 0 {
				f, err := os.Create(filepath.Join(o.scrapeSave, fmt.Sprintf("scrape%d.txt", len(out))))
				if err != nil {
					return nil, err
				}
				defer f.Close()
				save = f
			}
			c0, err := procCPU(pid)
			if err != nil {
				return nil, err
			}
			d, wire, text, series, format, err := scrapeOnce(ctx, c, q, save)
			if err != nil {
				return nil, err
			}
			c1, err := procCPU(pid)
			if err != nil {
				return nil, err
			}
			s.All, cpus = append(s.All, d.Seconds()), append(cpus, (c1-c0).Seconds())
			s.WireBytes, s.Bytes, s.Series, s.Format = wire, text, series, format
		}
		s.Sec, s.DaemonCPUSec = median(s.All), median(cpus)
		if s.RSSAfterMiB, s.DaemonPeakMiB, err = rssMiB(pid); err != nil {
			return nil, err
		}
		progress("scrape %q: %.3f s, %d series, %d bytes (%d sent), daemon CPU %.3f s, RSS %.0f → peak %.0f → %.0f MiB",
			q, s.Sec, s.Series, s.Bytes, s.WireBytes, s.DaemonCPUSec, s.RSSBeforeMiB, s.DaemonPeakMiB, s.RSSAfterMiB)
		out = append(out, s)
	}
	return out, nil
}

// scrapeProfiles scrapes the whole endpoint back to back for o.scrapeCPU
// while the daemon takes a CPU profile and an allocation profile of that
// time (needs --heap's profile endpoint), and returns their files and
// tops.
func scrapeProfiles(ctx context.Context, o scaleOptions, app, date string) (files []string, cpuTop, allocTop []string, err error) {
	ns, err := netns.Open(app)
	if err != nil {
		return nil, nil, nil, err
	}
	c := scrapeClient(ns)
	defer c.CloseIdleConnections()
	stem := filepath.Join(o.out, strings.ReplaceAll(date, ":", "")+"-scale.scrape")
	secs := max(int(o.scrapeCPU.Seconds()), 1)
	var wg sync.WaitGroup
	var cpuErr, allocErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		cpuTop, cpuErr = profile(app, stem+".cpu.pb.gz", fmt.Sprintf("profile?seconds=%d", secs), "")
	}()
	go func() {
		defer wg.Done()
		allocTop, allocErr = profile(app, stem+".allocs.pb.gz", fmt.Sprintf("allocs?seconds=%d", secs), "-sample_index=alloc_space")
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	scrapes := 0
	for {
		select {
		case <-done:
			if cpuErr != nil {
				return nil, nil, nil, cpuErr
			}
			if allocErr != nil {
				return nil, nil, nil, allocErr
			}
			cpuTop = append([]string{fmt.Sprintf("(%d scrapes)", scrapes)}, cpuTop...)
			return []string{stem + ".cpu.pb.gz", stem + ".allocs.pb.gz"}, cpuTop, allocTop, nil
		default:
		}
		if _, _, _, _, _, err := scrapeOnce(ctx, c, "", nil); err != nil {
			<-done
			return nil, nil, nil, err
		}
		scrapes++
	}
}
