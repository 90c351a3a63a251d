"""Instance names: one resolver for every command; a family name means its flagship, said in a note;
suggestions know the families; names the Neuron tools print are known."""
import json
import warnings

import pytest
from click.testing import CliRunner

import trnsim.specs as specs
from trnsim.cli import cli

# every command that takes an instance, with the arguments that make it quick and print JSON
COMMANDS = {
    "ls": lambda name: ["ls", "--instance", name, "--json"],
    "collective": lambda name: ["collective", "all_reduce", "--instance", name, "-b", "1K", "-e", "1K", "-n", "1",
                                "-w", "0", "--json"],
    "plan": lambda name: ["plan", "llama3-8b", "--instance", name, "--nodes", "4", "--json"],
}


def _run(args):
    return CliRunner().invoke(cli, args)


@pytest.mark.parametrize("family, flagship", [("trn1", "trn1.32xlarge"), ("trn2", "trn2.48xlarge"),
                                              ("trn3", "Trn3 Gen2 UltraServer"),
                                              ("trn3 UltraServer", "Trn3 Gen2 UltraServer"),
                                              ("trn3 gen1", "Trn3 Gen1 UltraServer")])
def test_a_family_name_means_its_flagship_with_a_note(family, flagship):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        specs._noticed.clear()
        assert specs.system(family).name == flagship
    assert any(issubclass(w.category, specs.NameNotice) and flagship in str(w.message) for w in seen)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_takes_the_same_family_names(command):
    """`--instance trn2` runs each command on trn2.48xlarge and says so once on stderr; stdout stays JSON."""
    specs._noticed.clear()
    r = _run(COMMANDS[command]("trn2"))
    assert r.exit_code == 0, r.output + r.stderr
    json.loads(r.stdout)
    assert "trn2.48xlarge" in r.stdout
    assert r.stderr.count("trnsim: note: 'trn2' is a family; using its flagship trn2.48xlarge") == 1


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_suggests_families_for_an_unknown_name(command):
    r = _run(COMMANDS[command]("trn4"))
    assert r.exit_code == 2 and "Traceback" not in r.output + r.stderr
    assert "unknown instance or UltraServer 'trn4'; did you mean trn3, trn2, trn1?" in r.stderr


def test_trn2n_from_neuron_ls_is_known():
    specs._noticed.clear()
    r = _run(["ls", "--instance", "trn2n.48xlarge", "--json"])
    assert r.exit_code == 0 and len(json.loads(r.stdout)) == 16
    assert "trn2n.48xlarge is simulated as trn2.48xlarge" in r.stderr


def test_specs_inf2_is_the_inferentia2_chip_and_inf2_as_an_instance_says_why_not():
    r = _run(["specs", "inf2", "--json"])
    d = json.loads(r.stdout)
    assert d["name"] == "Inferentia2" and d["core"]["name"] == "NeuronCore-v2" and d["cores"] == 2
    assert d["hbm_bytes"] == 32 * 2**30 and "inferentia2.rst" in d["sources"]["cores"]
    assert d["derived"]["peak_flops"]["current"]["bf16"] == 190e12  # the Inferentia2 page's figure
    r = _run(["ls", "--instance", "inf2"])
    assert r.exit_code == 2 and "the catalog has the Inferentia2 chip" in r.stderr and "no inf2 instance" in r.stderr


def test_specs_trn2_stays_the_chip_and_exact_instances_need_no_note():
    specs._noticed.clear()
    r = _run(["specs", "trn2", "--json"])
    assert json.loads(r.stdout)["name"] == "Trainium2" and r.stderr == ""
    r = _run(["ls", "--instance", "trn1.32xlarge", "--json"])
    assert r.exit_code == 0 and r.stderr == ""
