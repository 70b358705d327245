package main

// `fjord cluster info`: brokers, controller, cluster id and features.

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func clusterCmd(args []string, out, errOut io.Writer) int {
	return subcommand("cluster", map[string]func([]string, io.Writer, io.Writer) int{"info": clusterInfo}, args, out, errOut)
}

type clusterDesc struct {
	ClusterID  string `json:"cluster_id"`
	Controller int32  `json:"controller"`
	Brokers    []struct {
		ID   int32  `json:"id"`
		Host string `json:"host"`
		Port int32  `json:"port"`
		Rack string `json:"rack,omitempty"`
	} `json:"brokers"`
	Features []featureRow `json:"features"`
}

type featureRow struct {
	Name      string `json:"name"`
	Supported string `json:"supported"` // min-max the node supports
	Finalized int16  `json:"finalized"` // the cluster's level, -1 if not finalized
}

func clusterInfo(args []string, out, errOut io.Writer) int {
	c := newCLI("fjord cluster info", out, errOut)
	if code, ok := c.parse(args, 0, 0); !ok {
		return code
	}
	adm, ctx, done, err := c.adminCtx()
	if err != nil {
		return c.fail(err)
	}
	defer done()
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return c.fail(err)
	}
	d := clusterDesc{ClusterID: md.Cluster, Controller: md.Controller, Features: []featureRow{}}
	for _, b := range md.Brokers {
		r := struct {
			ID   int32  `json:"id"`
			Host string `json:"host"`
			Port int32  `json:"port"`
			Rack string `json:"rack,omitempty"`
		}{ID: b.NodeID, Host: b.Host, Port: b.Port}
		if b.Rack != nil {
			r.Rack = *b.Rack
		}
		d.Brokers = append(d.Brokers, r)
	}
	// Features come with ApiVersions v3+ (KIP-584), from any broker.
	cl, err := c.client()
	if err != nil {
		return c.fail(err)
	}
	defer cl.Close()
	kresp, err := cl.Request(ctx, kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		return c.fail(fmt.Errorf("ApiVersions: %w", err))
	}
	av := kresp.(*kmsg.ApiVersionsResponse)
	fin := map[string]int16{}
	for _, f := range av.FinalizedFeatures {
		fin[f.Name] = f.MaxVersionLevel
	}
	for _, f := range av.SupportedFeatures {
		lvl, ok := fin[f.Name]
		if !ok {
			lvl = -1
		}
		d.Features = append(d.Features, featureRow{f.Name, fmt.Sprintf("%d-%d", f.MinVersion, f.MaxVersion), lvl})
	}
	c.emit(d, func(w *tabwriter.Writer) {
		fmt.Fprintf(w, "Cluster ID: %s\nController: %d\n", d.ClusterID, d.Controller)
		fmt.Fprintln(w, "BROKER\tHOST\tPORT\tRACK")
		for _, b := range d.Brokers {
			fmt.Fprintf(w, "%d\t%s\t%d\t%s\n", b.ID, b.Host, b.Port, b.Rack)
		}
		if len(d.Features) > 0 {
			w.Flush()
			fmt.Fprintln(w, "\nFEATURE\tSUPPORTED\tFINALIZED")
			for _, f := range d.Features {
				fmt.Fprintf(w, "%s\t%s\t%d\n", f.Name, f.Supported, f.Finalized)
			}
		}
	})
	return exitOK
}
