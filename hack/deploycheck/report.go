package main

import (
	"fmt"
	"io"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// problem is one finding: an error fails the check, a warning does not.
type problem struct {
	warning bool
	where   string // file, and the object or line in it
	msg     string
}

func (p problem) String() string {
	level := "error"
	if p.warning {
		level = "warning"
	}
	return fmt.Sprintf("%s: %s: %s", p.where, level, p.msg)
}

// report collects the problems of a run.
type report struct {
	problems []problem
}

func (r *report) errorf(where, format string, a ...any) {
	r.problems = append(r.problems, problem{where: where, msg: fmt.Sprintf(format, a...)})
}

func (r *report) warnf(where, format string, a ...any) {
	r.problems = append(r.problems, problem{warning: true, where: where, msg: fmt.Sprintf(format, a...)})
}

// fields records Kubernetes field errors, each with its field path.
func (r *report) fields(where string, errs field.ErrorList) {
	for _, e := range errs {
		r.errorf(where, "%s", e.Error())
	}
}

// errors counts the errors (not the warnings).
func (r *report) errors() int {
	n := 0
	for _, p := range r.problems {
		if !p.warning {
			n++
		}
	}
	return n
}

// print writes the problems, in file order, one a line.
func (r *report) print(w io.Writer) {
	sort.SliceStable(r.problems, func(i, j int) bool { return r.problems[i].where < r.problems[j].where })
	for _, p := range r.problems {
		fmt.Fprintln(w, p)
	}
}
