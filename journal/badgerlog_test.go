package journal

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestBadgerLogger: Badger's cache statistics go at debug level, its real
// warnings and errors at theirs, its info lines at debug.
func TestBadgerLogger(t *testing.T) {
	for _, tc := range []struct {
		name string
		log  func(badgerLogger)
		want string // the level logged, "" for none at info
	}{
		{"block cache stats", func(l badgerLogger) {
			l.Warningf("%s might be too small. Metrics: %s\n", "Block cache", "hit: 1 miss: 30")
		}, "DEBUG"},
		{"index cache stats", func(l badgerLogger) {
			l.Warningf("%s might be too small. Metrics: %s\n", "Index cache", "hit: 1 miss: 30")
		}, "DEBUG"},
		{"life expectancy", func(l badgerLogger) { l.Warningf("Cache life expectancy (in seconds): %+v\n", "histogram") }, "DEBUG"},
		{"compaction warning", func(l badgerLogger) { l.Warningf("While running doCompact: %v\n", "disk full") }, "WARN"},
		{"error", func(l badgerLogger) { l.Errorf("Failure while flushing memtable to disk: %v", "EIO") }, "ERROR"},
		{"info", func(l badgerLogger) { l.Infof("All %d tables opened in %s", 3, "1ms") }, "DEBUG"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			tc.log(badgerLogger{slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
			if got := buf.String(); !strings.Contains(got, "level="+tc.want+" ") || strings.Count(got, "\n") != 1 {
				t.Errorf("logged %q, want one line at %s", got, tc.want)
			}
		})
	}
}
