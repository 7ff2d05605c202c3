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

// ReadFileAfterCrashes is ReadFile for a trace whose sidecar may have been
// killed in the middle of writing a line: a line cut short, then the Open
// line of the next run appended to it (the file is opened for appending),
// counts as that Open line; a last line cut short and without its newline
// is dropped. It returns how many cut lines it let through; any other
// malformed line is an error, as for ReadFile.
func ReadFileAfterCrashes(path string) ([]Line, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("trace: %w", err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var lines []Line
	cut := 0
	for n := 1; ; n++ {
		b, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return nil, 0, fmt.Errorf("trace %s: reading line %d: %w", path, n, err)
		}
		if len(b) == 0 {
			return lines, cut, nil
		}
		l, perr := parseLine(b)
		if perr != nil {
			if open, ok := openAfterCut(b); ok {
				l, perr = open, nil
				cut++
			} else if err == io.EOF && !bytes.HasSuffix(b, []byte("\n")) {
				return lines, cut + 1, nil
			}
		}
		if perr != nil {
			return nil, 0, fmt.Errorf("trace %s: line %d: %w", path, n, perr)
		}
		lines = append(lines, l)
	}
}

// openAfterCut finds, at the end of a line that does not parse, the Open
// line a restarted Tracer appended to it (its first line: seq 1).
func openAfterCut(b []byte) (Line, bool) {
	i := bytes.LastIndex(b, []byte(`{"seq":1,`))
	if i <= 0 {
		return Line{}, false
	}
	l, err := parseLine(b[i:])
	return l, err == nil && l.Action == ActionOpen
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
