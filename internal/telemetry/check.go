package telemetry

import (
	"bufio"
	"fmt"
	"strings"
)

// CheckExposition reads metrics in the Prometheus text format and returns
// an error naming the first writ_ series whose label value is outside its
// allowed set: Allowed's sets, extra's (node ids, violation codes), and
// the exposition's own le for histogram buckets. A label no set names is
// an error too: every label must be bounded.
func CheckExposition(text string, extra map[string]map[string]bool) (series int, err error) {
	allowed := Allowed()
	for k, v := range extra {
		allowed[k] = v
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "writ_") {
			continue
		}
		series++
		open := strings.IndexByte(line, '{')
		if open < 0 {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < open {
			return series, fmt.Errorf("malformed line %q", line)
		}
		for _, pair := range splitLabels(line[open+1 : end]) {
			k, v, ok := strings.Cut(pair, "=")
			if !ok {
				return series, fmt.Errorf("malformed label %q in %q", pair, line)
			}
			v = strings.Trim(v, `"`)
			if k == "le" {
				continue
			}
			set, ok := allowed[k]
			if !ok {
				return series, fmt.Errorf("label %s has no bounded set of values: %q", k, line)
			}
			if !set[v] {
				return series, fmt.Errorf("label %s=%q is outside its allowed set: %q", k, v, line)
			}
		}
	}
	return series, sc.Err()
}

// splitLabels splits a="x",b="y" at the commas between quoted values.
func splitLabels(s string) []string {
	var out []string
	in, start := false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			in = !in
		case ',':
			if !in {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
