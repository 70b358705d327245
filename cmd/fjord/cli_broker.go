package main

// `fjord broker describe-config|alter-config`: kafka-configs.sh
// --entity-type brokers, over DescribeConfigs and IncrementalAlterConfigs.

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func brokerCmd(args []string, out, errOut io.Writer) int {
	return subcommand("broker", map[string]func([]string, io.Writer, io.Writer) int{
		"describe-config": brokerDescribeConfig, "alter-config": brokerAlterConfig,
	}, args, out, errOut)
}

// brokerEntity is kafka-configs.sh's choice of broker resource: one broker
// (--entity-name N) or the cluster-wide default (--entity-default).
type brokerEntity struct {
	name *string
	def  *bool
}

func (c *cli) brokerEntityFlags() brokerEntity {
	return brokerEntity{
		name: c.fs.String("entity-name", "", "the broker id whose configuration this is"),
		def:  c.fs.Bool("entity-default", false, "the cluster-wide default of every broker"),
	}
}

// ids returns the brokers to pass to kadm (none: the cluster-wide default)
// and a label for messages, or an error for a bad choice.
func (e brokerEntity) ids() ([]int32, string, error) {
	if (*e.name == "") == !*e.def {
		return nil, "", fmt.Errorf("give one of --entity-name N and --entity-default")
	}
	if *e.def {
		return nil, "the cluster-wide default", nil
	}
	id, err := strconv.ParseInt(*e.name, 10, 32)
	if err != nil || id < 0 {
		return nil, "", fmt.Errorf("--entity-name %q: want a broker id", *e.name)
	}
	return []int32{int32(id)}, "broker " + *e.name, nil
}

type configRow struct {
	Name      string       `json:"name"`
	Value     *string      `json:"value"` // nil: sensitive or unset
	Source    string       `json:"source"`
	Sensitive bool         `json:"sensitive,omitempty"`
	Synonyms  []synonymRow `json:"synonyms,omitempty"`
}

type synonymRow struct {
	Name   string  `json:"name"`
	Value  *string `json:"value"`
	Source string  `json:"source"`
}

// dynamicSource: a value set at run time, which describe-config shows
// without --all (as kafka-configs.sh --describe does).
func dynamicSource(s kmsg.ConfigSource) bool {
	switch s {
	case kmsg.ConfigSourceDynamicBrokerConfig, kmsg.ConfigSourceDynamicDefaultBrokerConfig, kmsg.ConfigSourceDynamicBrokerLoggerConfig:
		return true
	}
	return false
}

func brokerDescribeConfig(args []string, out, errOut io.Writer) int {
	c := newCLI("fjord broker describe-config", out, errOut)
	ent := c.brokerEntityFlags()
	all := c.fs.Bool("all", false, "every key with its effective value, not only those set at run time")
	if code, ok := c.parse(args, 0, 0); !ok {
		return code
	}
	ids, label, err := ent.ids()
	if err != nil {
		return c.usageErr("%v", err)
	}
	adm, ctx, done, err := c.adminCtx()
	if err != nil {
		return c.fail(err)
	}
	defer done()
	rcs, err := adm.DescribeBrokerConfigs(ctx, ids...)
	if err != nil {
		return c.fail(fmt.Errorf("%s: %w", label, err))
	}
	rows := []configRow{}
	for _, rc := range rcs {
		if rc.Err != nil {
			return c.fail(fmt.Errorf("%s: %w %s", label, rc.Err, rc.ErrMessage))
		}
		for _, cf := range rc.Configs {
			if !*all && !dynamicSource(cf.Source) {
				continue
			}
			r := configRow{Name: cf.Key, Value: cf.Value, Source: cf.Source.String(), Sensitive: cf.Sensitive}
			for _, s := range cf.Synonyms {
				r.Synonyms = append(r.Synonyms, synonymRow{s.Key, s.Value, s.Source.String()})
			}
			rows = append(rows, r)
		}
	}
	sortRows(rows, func(a, b configRow) bool { return a.Name < b.Name })
	c.emit(rows, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "Configuration of %s:\n", label)
		fmt.Fprintln(w, "KEY\tVALUE\tSOURCE\tSYNONYMS")
		for _, r := range rows {
			var syn []string
			for _, s := range r.Synonyms {
				syn = append(syn, s.Source+":"+s.Name+"="+showValue(s.Value, false))
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.Name, showValue(r.Value, r.Sensitive), r.Source, strings.Join(syn, " "))
		}
	})
	return exitOK
}

func showValue(v *string, sensitive bool) string {
	switch {
	case sensitive:
		return "(sensitive)"
	case v == nil:
		return "(null)"
	}
	return *v
}

// brokerAlterConfig changes a broker's or the cluster-wide default's keys
// one by one (IncrementalAlterConfigs), as kafka-configs.sh --alter does.
func brokerAlterConfig(args []string, out, errOut io.Writer) int {
	c := newCLI("fjord broker alter-config", out, errOut)
	ent := c.brokerEntityFlags()
	var add, del listFlag
	c.fs.Var(&add, "add-config", "k=v[,k2=v2]... to set (a list value in brackets: k=[a,b]); repeatable")
	c.fs.Var(&del, "delete-config", "k[,k2]... to remove, back to the next source; repeatable")
	if code, ok := c.parse(args, 0, 0); !ok {
		return code
	}
	ids, label, err := ent.ids()
	if err != nil {
		return c.usageErr("%v", err)
	}
	alters, err := configAlters(add, del)
	if err != nil {
		return c.usageErr("%v", err)
	}
	adm, ctx, done, err := c.adminCtx()
	if err != nil {
		return c.fail(err)
	}
	defer done()
	resps, err := adm.AlterBrokerConfigs(ctx, alters, ids...)
	if err != nil {
		return c.fail(fmt.Errorf("%s: %w", label, err))
	}
	for _, r := range resps {
		if r.Err != nil {
			return c.fail(fmt.Errorf("%s: %w %s", label, r.Err, r.ErrMessage))
		}
	}
	entity := "default"
	if len(ids) > 0 {
		entity = strconv.Itoa(int(ids[0]))
	}
	c.emit(map[string]any{"broker": entity, "altered": len(alters)}, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "altered %d configuration keys of %s\n", len(alters), label)
	})
	return exitOK
}

// configAlters turns kafka-configs.sh's --add-config and --delete-config
// values into the operations, refusing a key named twice.
func configAlters(add, del []string) ([]kadm.AlterConfig, error) {
	var alters []kadm.AlterConfig
	seen := map[string]bool{}
	note := func(k string) error {
		if k == "" {
			return fmt.Errorf("an empty key")
		}
		if seen[k] {
			return fmt.Errorf("key %s given twice", k)
		}
		seen[k] = true
		return nil
	}
	for _, a := range add {
		for _, kv := range splitConfigList(a) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, fmt.Errorf("--add-config %q: want key=value", kv)
			}
			if err := note(k); err != nil {
				return nil, fmt.Errorf("--add-config: %w", err)
			}
			// kafka-configs.sh's list syntax: k=[a,b] sets "a,b".
			if len(v) >= 2 && v[0] == '[' && v[len(v)-1] == ']' {
				v = v[1 : len(v)-1]
			}
			alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &v})
		}
	}
	for _, d := range del {
		for _, k := range strings.Split(d, ",") {
			if err := note(strings.TrimSpace(k)); err != nil {
				return nil, fmt.Errorf("--delete-config: %w", err)
			}
			alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: strings.TrimSpace(k)})
		}
	}
	if len(alters) == 0 {
		return nil, fmt.Errorf("nothing to alter: give --add-config k=v or --delete-config k")
	}
	return alters, nil
}

// splitConfigList splits at the commas outside brackets.
func splitConfigList(s string) []string {
	var out []string
	depth, from := 0, 0
	for i, ch := range s {
		switch ch {
		case '[':
			depth++
		case ']':
			depth = max(depth-1, 0)
		case ',':
			if depth == 0 {
				out = append(out, s[from:i])
				from = i + 1
			}
		}
	}
	return append(out, s[from:])
}
