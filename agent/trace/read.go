package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// Read parses a trace written by a Tracer: one JSON Line per line. A line
// that does not parse, is empty or has no action is an error naming its line
// number (a sidecar killed in the middle of a write leaves a partial line).
func Read(r io.Reader) ([]Line, error) {
	lines, err := read(r)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	return lines, nil
}

// ReadFile reads the trace in the file at path.
func ReadFile(path string) ([]Line, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	defer f.Close()
	lines, err := read(f)
	if err != nil {
		return nil, fmt.Errorf("trace %s: %w", path, err)
	}
	return lines, nil
}

func read(r io.Reader) ([]Line, error) {
	br := bufio.NewReader(r)
	var lines []Line
	for n := 1; ; n++ {
		b, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("reading line %d: %w", n, err)
		}
		if len(b) == 0 { // end of input (a last line without '\n' came with io.EOF)
			return lines, nil
		}
		l, err := parseLine(b)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		lines = append(lines, l)
	}
}

func parseLine(b []byte) (Line, error) {
	var l Line
	if len(bytes.TrimSpace(b)) == 0 {
		return l, errors.New("empty line")
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return l, err
	}
	if l.Action == "" {
		return l, errors.New("no action")
	}
	return l, nil
}
