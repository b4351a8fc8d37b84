package ctl

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	ironlinkv1 "github.com/ironlink/ironlink/gen/ironlink/v1"
)

// Shell completion (`ironlink completion bash|zsh|fish|powershell`) asks
// the hub for names; a hub that cannot be reached just completes nothing.

const completionTimeout = 3 * time.Second

func (a *app) completeContexts(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	cfg, err := a.loadConfig()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, x := range cfg.Contexts {
		if strings.HasPrefix(x.Name, toComplete) {
			out = append(out, x.Name)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

func (a *app) completeSites(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	c, err := a.connect()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	r, err := c.fleet.ListSites(ctx, &ironlinkv1.ListSitesRequest{})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, s := range r.GetSites() {
		if strings.HasPrefix(s.GetName(), toComplete) {
			out = append(out, s.GetName())
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeDevices completes device names by prefix (ListDevices
// name_prefix), SITE/NAME after a slash.
func (a *app) completeDevices(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	c, err := a.connect()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	req := &ironlinkv1.ListDevicesRequest{NamePrefix: toComplete, PageSize: 200}
	sitePrefix := ""
	if i := strings.IndexByte(toComplete, '/'); i >= 0 {
		req.Site, req.NamePrefix, sitePrefix = toComplete[:i], toComplete[i+1:], toComplete[:i+1]
	} else if f := cmd.Flags().Lookup("site"); f != nil {
		req.Site = f.Value.String()
	}
	r, err := c.fleet.ListDevices(ctx, req)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, d := range r.GetDevices() {
		if d.GetName() != "" {
			out = append(out, sitePrefix+d.GetName()+"\t"+d.GetSite()+" "+statusName(d.GetStatus()))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
