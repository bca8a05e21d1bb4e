package harness

import (
	"encoding/json"
	"fmt"
)

// OpenClawPlugin is the plugin entry writ installs into an OpenClaw
// config: plugins.entries.<ID> = {"enabled": true, "config": Config},
// Dir in plugins.load.paths, and ID in plugins.allow when the config has
// an allow list (OpenClaw then loads only the plugins it names).
type OpenClawPlugin struct {
	ID  string
	Dir string // the plugin directory (absolute)
	// Config is the entry's config object; nil keeps the config an
	// earlier install wrote.
	Config json.RawMessage
}

// InstallOpenClawPlugin merges p into the OpenClaw config document doc
// (empty means a new file) and returns the new document and whether it
// changed. Other keys, plugins and paths stay as they were, in their
// order; installing twice changes nothing the second time.
func InstallOpenClawPlugin(doc []byte, p OpenClawPlugin) ([]byte, bool, error) {
	if p.ID == "" || p.Dir == "" {
		return nil, false, fmt.Errorf("%w: incomplete plugin entry", ErrSettings)
	}
	root, err := parseSettings(doc)
	if err != nil {
		return nil, false, err
	}
	plugins, err := root.childObject("plugins", true)
	if err != nil {
		return nil, false, err
	}
	entries, err := plugins.childObject("entries", true)
	if err != nil {
		return nil, false, err
	}
	entry, err := entries.childObject(p.ID, true)
	if err != nil {
		return nil, false, err
	}
	entry.set("enabled", true)
	if p.Config != nil {
		cfg, err := parseSettings(p.Config)
		if err != nil {
			return nil, false, fmt.Errorf("the plugin config: %w", err)
		}
		entry.set("config", cfg)
	} else if _, ok := entry.getOK("config"); !ok {
		entry.set("config", &object{})
	}
	load, err := plugins.childObject("load", true)
	if err != nil {
		return nil, false, err
	}
	paths, err := load.childArray("paths", "plugins.load.paths")
	if err != nil {
		return nil, false, err
	}
	if !containsString(paths, p.Dir) {
		paths = append(paths, p.Dir)
	}
	load.set("paths", paths)
	if allow, err := plugins.childArray("allow", "plugins.allow"); err != nil {
		return nil, false, err
	} else if allow != nil && !containsString(allow, p.ID) {
		plugins.set("allow", append(allow, p.ID))
	}
	out := render(root)
	return out, !sameJSON(doc, out), nil
}

// UninstallOpenClawPlugin removes the entry id, the load paths ownsPath
// recognises, id from plugins.allow, and whatever object or list that
// left empty; nothing else. It returns the new document and whether it
// changed.
func UninstallOpenClawPlugin(doc []byte, id string, ownsPath func(string) bool) ([]byte, bool, error) {
	root, err := parseSettings(doc)
	if err != nil {
		return nil, false, err
	}
	plugins, ok := root.get("plugins").(*object)
	if !ok {
		return doc, false, nil
	}
	removed := false
	if entries, ok := plugins.get("entries").(*object); ok {
		if _, had := entries.getOK(id); had {
			entries.delete(id)
			removed = true
			if len(entries.keys) == 0 {
				plugins.delete("entries")
			}
		}
	}
	if load, ok := plugins.get("load").(*object); ok {
		if paths, ok := load.get("paths").([]any); ok {
			kept := paths[:0:0]
			for _, v := range paths {
				if s, ok := v.(string); ok && ownsPath(s) {
					continue
				}
				kept = append(kept, v)
			}
			if len(kept) != len(paths) {
				removed = true
				if len(kept) == 0 {
					load.delete("paths")
				} else {
					load.set("paths", kept)
				}
				if len(load.keys) == 0 {
					plugins.delete("load")
				}
			}
		}
	}
	if allow, ok := plugins.get("allow").([]any); ok {
		kept := allow[:0:0]
		for _, v := range allow {
			if s, ok := v.(string); ok && s == id {
				continue
			}
			kept = append(kept, v)
		}
		if len(kept) != len(allow) {
			// An allow list is kept even when empty: without one,
			// OpenClaw would load every plugin it finds.
			removed = true
			plugins.set("allow", kept)
		}
	}
	if !removed {
		return doc, false, nil
	}
	if len(plugins.keys) == 0 {
		root.delete("plugins")
	}
	return render(root), true, nil
}

func containsString(list []any, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
