// Package valuesdoc reads the chart's values.yaml as helm-docs does: a
// comment "# -- text" (continued by "#" lines) right above a key documents
// it. That comment is the one description of a setting: hack/chart-readme
// renders it into the chart's README, and test/golden holds the CSV's
// descriptors and the README's flag table to it (TestDescriptions).
package valuesdoc

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Row is one documented value: a row of the chart README's values table.
type Row struct {
	Key, Type, Default, Description string
}

// Rows reads a values file into rows, sorted by key. A documented key is
// one row, whole, however deep its value; an undocumented map is walked
// into; any other undocumented key is a row without description.
func Rows(values []byte) ([]Row, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(values, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	var rows []Row
	if err := walk(doc.Content[0], "", &rows); err != nil {
		return nil, err
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Key < rows[j].Key })
	return rows, nil
}

// flagPrefix is how a value that sets a controller flag names it: its
// description starts "--flag-name: ".
var flagPrefix = regexp.MustCompile(`^(--[a-z0-9-]+): `)

// Split parts a description into the controller flag it names, if any, and
// the text that describes the setting wherever it is shown (the CSV, the
// README's flag table), without the flag.
func Split(description string) (flag, text string) {
	if m := flagPrefix.FindStringSubmatch(description); m != nil {
		return m[1], description[len(m[0]):]
	}
	return "", description
}

func walk(m *yaml.Node, prefix string, rows *[]Row) error {
	if m.Kind != yaml.MappingNode {
		return fmt.Errorf("%s is not a map", strings.TrimSuffix(prefix, "."))
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		key := prefix + k.Value
		desc, documented := description(k.HeadComment)
		if !documented && v.Kind == yaml.MappingNode && len(v.Content) > 0 {
			if err := walk(v, key+".", rows); err != nil {
				return err
			}
			continue
		}
		def, err := defaultOf(v)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		*rows = append(*rows, Row{Key: key, Type: typeOf(v), Default: def, Description: desc})
	}
	return nil
}

// description is the helm-docs comment of a key: its last "# --" line and
// the comment lines after it, joined.
func description(comment string) (string, bool) {
	lines := strings.Split(comment, "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "# --") {
			start = i
		}
	}
	if start < 0 {
		return "", false
	}
	var parts []string
	for i, l := range lines[start:] {
		l = strings.TrimSpace(l)
		if i == 0 {
			l = strings.TrimPrefix(l, "# --")
		} else if !strings.HasPrefix(l, "#") {
			break
		} else {
			l = strings.TrimPrefix(l, "#")
		}
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, " "), true
}

func typeOf(v *yaml.Node) string {
	switch v.Kind {
	case yaml.SequenceNode:
		return "list"
	case yaml.MappingNode:
		return "object"
	}
	switch v.Tag {
	case "!!int":
		return "int"
	case "!!float":
		return "float"
	case "!!bool":
		return "bool"
	}
	return "string"
}

// defaultOf is the value as JSON, keys sorted, as helm-docs shows it.
func defaultOf(v *yaml.Node) (string, error) {
	var x any
	if err := v.Decode(&x); err != nil {
		return "", err
	}
	b, err := json.Marshal(x)
	if err != nil {
		return "", err
	}
	return string(b), nil
}
