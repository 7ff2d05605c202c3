package introspection

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// TestDocsListTheSchema checks that the tree drawn in
// docs/introspection.md has exactly the leaves of schema.
func TestDocsListTheSchema(t *testing.T) {
	doc, err := os.ReadFile("../docs/introspection.md")
	if err != nil {
		t.Fatal(err)
	}
	keys := regexp.MustCompile(`\[[^]]*\]`)
	var documented []string
	var stack []string // the names of the nodes above, by depth
	type node struct {
		path  string
		depth int
	}
	var nodes []node
	for line := range strings.Lines(string(doc)) {
		i := strings.Index(line, "── ")
		if i < 0 || !strings.ContainsAny(line[:i], "├└") {
			continue
		}
		depth := (utf8.RuneCountInString(line[:i]) - 5) / 4
		name := keys.ReplaceAllString(strings.Fields(line[i+len("── "):])[0], "")
		stack = append(stack[:min(depth, len(stack))], name)
		nodes = append(nodes, node{path: strings.Join(stack, "/"), depth: depth})
	}
	for n, nd := range nodes {
		if n+1 < len(nodes) && nodes[n+1].depth > nd.depth {
			continue // a container or list: its leaves follow
		}
		documented = append(documented, nd.path)
	}
	var want []string
	var walk func(n *schemaNode, at string)
	walk = func(n *schemaNode, at string) {
		if len(n.children) == 0 {
			want = append(want, at)
			return
		}
		for _, c := range n.children {
			walk(c, strings.TrimPrefix(at+"/"+c.name, "/"))
		}
	}
	walk(schema(), "")
	slices.Sort(documented)
	slices.Sort(want)
	if diff := cmp.Diff(want, documented); diff != "" {
		t.Errorf("docs/introspection.md's tree and the schema differ (-schema +docs):\n%s", diff)
	}
}
