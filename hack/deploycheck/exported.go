package main

// The metrics the rules and dashboards name, against those a running
// sidecar exports.

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// generated are the series Prometheus makes itself for every target.
var generated = map[string]bool{"up": true, "scrape_duration_seconds": true, "scrape_samples_scraped": true}

// exportedNames scrapes addr's /metrics and returns the series names its
// families declare (HELP/TYPE), whether or not they have samples yet: a
// histogram family gives its _bucket, _sum and _count, a summary _sum and
// _count.
func exportedNames(addr string) (map[string]bool, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	tp := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := tp.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for name, f := range fams {
		names[name] = true
		switch f.GetType().String() {
		case "HISTOGRAM":
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[name+s] = true
			}
		case "SUMMARY":
			names[name+"_sum"], names[name+"_count"] = true, true
		}
	}
	return names, nil
}

// checkExported reports each metric the rules and dashboards name that the
// sidecar at addr does not export.
func (c *checker) checkExported(addr string) {
	names, err := exportedNames(addr)
	if err != nil {
		c.errorf(addr, "scraping the sidecar: %v", err)
		return
	}
	if len(c.metrics) == 0 {
		c.errorf(addr, "no rule or dashboard names a metric")
	}
	for _, m := range slices.Sorted(maps.Keys(c.metrics)) {
		if !names[m] && !generated[m] {
			c.errorf(strings.Join(c.metrics[m], "; "), "metric %s is not exported by the sidecar (http://%s/metrics)", m, addr)
		}
	}
}
