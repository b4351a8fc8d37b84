package store

import (
	"maps"
	"sync"

	"github.com/ironlink/ironlink/internal/condition"
)

// GroupCacheDevices bounds how many devices' current conditions a Store
// keeps in memory for its group committer (condCache): about 1–2 KiB a
// device with 7 conditions. Beyond it a site's entry of another site is
// dropped, and a device that still does not fit is read as before.
const GroupCacheDevices = 20_000

// condCache keeps, per site whose link this replica holds, the current
// conditions of the devices its groups wrote (issue 26 item 2), so that a
// group reads only the device rows (status, desired impairment) and not
// their conditions. The link's replica is the only writer of its site's
// conditions through the group committer; every other writer (writeHealth:
// health reports, health expiry, the hub's own conditions, from any
// replica) bumps sites.conditions_version. An entry is used only by a
// group of the same link epoch that read, under the site's lock, the
// version the entry was kept at; it is kept only after its group
// committed, and dropped when a group of its site fails. Its zero value is
// ready.
type condCache struct {
	mu      sync.Mutex
	sites   map[string]*siteCache
	devices int
}

// siteCache is one site's entry: the conditions its devices had after
// the last committed group of link epoch epoch, at conditions version
// version.
type siteCache struct {
	epoch, version int64
	conds          map[string]map[condition.Type]condition.Condition
}

// cacheStamp is the epoch and version of a site's entry that a lookup
// used.
type cacheStamp struct{ epoch, version int64 }

// lookup copies the cached conditions of it's devices into current (an
// empty map for a device kept without conditions), returns the ids it did
// not have appended to miss and the ids it had appended to hit, and notes
// in used the entry's stamp.
func (c *condCache) lookup(it *groupItem, current map[string]map[condition.Type]condition.Condition, used map[string]cacheStamp,
	miss, hit []string) ([]string, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sc := c.sites[it.site]
	if sc == nil || sc.epoch != it.epoch {
		for _, d := range it.batch.Devices {
			miss = append(miss, d.DeviceID)
		}
		return miss, hit
	}
	used[it.site] = cacheStamp{epoch: sc.epoch, version: sc.version}
	for _, d := range it.batch.Devices {
		conds, ok := sc.conds[d.DeviceID]
		if !ok {
			miss = append(miss, d.DeviceID)
			continue
		}
		if _, done := current[d.DeviceID]; !done {
			current[d.DeviceID] = maps.Clone(conds)
			if current[d.DeviceID] == nil {
				current[d.DeviceID] = map[condition.Type]condition.Condition{}
			}
			hit = append(hit, d.DeviceID)
		}
	}
	return miss, hit
}

// drop forgets site's entry.
func (c *condCache) drop(site string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(site)
}

func (c *condCache) dropLocked(site string) {
	if sc := c.sites[site]; sc != nil {
		c.devices -= len(sc.conds)
		delete(c.sites, site)
	}
}

// keep stores, after their group committed, the conditions of the
// applied items' devices as the group left them (current), for each
// site at the conditions version its group read (versions).
func (c *condCache) keep(applied []*groupItem, current map[string]map[condition.Type]condition.Condition, versions map[string]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sites == nil {
		c.sites = map[string]*siteCache{}
	}
	for _, it := range applied {
		sc := c.sites[it.site]
		if sc == nil || sc.epoch != it.epoch || sc.version != versions[it.site] {
			c.dropLocked(it.site)
			sc = &siteCache{epoch: it.epoch, version: versions[it.site], conds: map[string]map[condition.Type]condition.Condition{}}
			c.sites[it.site] = sc
		}
		for _, d := range it.batch.Devices {
			_, had := sc.conds[d.DeviceID]
			if !had && !c.makeRoom(it.site) {
				continue
			}
			if !had {
				c.devices++
			}
			// The group is done with current: its maps are the entry's now.
			sc.conds[d.DeviceID] = current[d.DeviceID]
		}
	}
}

// makeRoom drops other sites' entries until one more device fits; false
// when none is left to drop.
func (c *condCache) makeRoom(keepSite string) bool {
	for c.devices >= GroupCacheDevices {
		dropped := false
		for site := range c.sites {
			if site != keepSite {
				c.dropLocked(site)
				dropped = true
				break
			}
		}
		if !dropped {
			return false
		}
	}
	return true
}
