"""The shared error base: named classes, close-name hints, the user's file:line."""
import pytest

from trnsim.errors import ConfigError, TrnsimError, UnknownNameError, user_location


def test_unknown_name_suggests_close_names():
    e = UnknownNameError("instance", "trn2.48xlarg", ["trn1.32xlarge", "trn2.48xlarge", "trn2u.48xlarge"])
    assert isinstance(e, TrnsimError) and isinstance(e, KeyError)
    assert str(e).startswith("unknown instance 'trn2.48xlarg'; did you mean trn2.48xlarge")
    assert e.exit_code == 2


def test_unknown_name_lists_all_when_nothing_is_close():
    e = UnknownNameError("dtype", "zzz", ["bfloat16", "float32"])
    assert str(e) == "unknown dtype 'zzz'; known: bfloat16, float32"


def test_config_error_is_a_value_error():
    with pytest.raises(ValueError):
        raise ConfigError("LNC 2 needs a Trn2 or Trn3 chip")


def test_user_location_points_at_this_file():
    loc = user_location()
    assert loc is not None and loc.rsplit(":", 1)[0].endswith("test_errors.py")
    assert int(loc.rsplit(":", 1)[1]) > 0
