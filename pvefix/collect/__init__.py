"""`pvefix collect`: gather a host tree on a host with only a console, and read it back.

`script.render_script` makes the POSIX sh script the admin pastes into the host's console;
`importer.import_bundle` unpacks its tarball safely and writes `pvefix-host.json` from the raw
command outputs the script kept in `.pvefix-facts/` (parsed by `facts.meta_from_facts`).
"""

from pvefix.collect.facts import FACTS_DIR, meta_from_facts
from pvefix.collect.importer import ImportSummary, import_bundle
from pvefix.collect.script import render_script

__all__ = ["FACTS_DIR", "ImportSummary", "import_bundle", "meta_from_facts", "render_script"]
