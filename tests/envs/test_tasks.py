"""The task declaration protocol: every registered task's declaration agrees with what it does,
and every consumer (gym, rollout, export, parity, presets) derives from it."""

import dataclasses
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from so101_mjx.data.record import environment_state_names
from so101_mjx.envs import Info, make, names, task
from so101_mjx.envs.arm import AGENT_POS_SIZE
from so101_mjx.envs.base import SO101Env
from so101_mjx.envs.block import BlockTask
from so101_mjx.envs.tasks import BUILTIN
from so101_mjx.robot.scenes import scene_names
from so101_mjx.training import presets
from so101_mjx.training.export import obs_layout
from so101_mjx.validation import reference
from so101_mjx.validation.parity import initial_state


@pytest.fixture(scope="module", params=names())
def env(request):
    return make(request.param, backend="c")


def test_declaration_is_complete(env):
    cls = type(env)
    assert cls.name in names() and cls.scene in scene_names()
    assert isinstance(cls.instruction, str) and cls.instruction.endswith(".")
    assert len(environment_state_names(cls.name)) == env.observation_size - AGENT_POS_SIZE
    assert dataclasses.is_dataclass(env.config) and isinstance(env.config, cls.config_class)
    assert all(isinstance(n, str) and isinstance(k, int) and k >= 1 for n, k in cls.observation_layout)
    for site in cls.markers:
        env.mj_model.site(site)  # KeyError when the scene lacks the marker site
    keywords = {n for n, p in inspect.signature(cls.reset_to).parameters.items() if p.kind is p.KEYWORD_ONLY}
    assert set(cls.fixed_reset) <= keywords


def test_layout_matches_the_observation(env):
    s = jax.jit(env.reset)(jax.random.PRNGKey(0))
    assert isinstance(s.info, Info) and s.obs.shape == (env.observation_size,)
    slices = env.observation_slices()
    assert slices[env.observation_layout[-1][0]].stop == env.observation_size
    entries = env.task_observation(s.physics, s.info)
    for name, size in env.observation_layout:
        assert entries[name].shape == (size,)
        np.testing.assert_array_equal(s.obs[slices[name]], entries[name])
    assert env.observation_size - AGENT_POS_SIZE == sum(size for _, size in env.observation_layout)


def test_reward_is_the_sum_of_its_logged_terms(env):
    s = jax.jit(env.reset)(jax.random.PRNGKey(1))
    n = jax.jit(env.step)(s, jnp.asarray([0.3, -0.2, -0.5, 0.0]))
    terms = {k.removeprefix("reward/"): v for k, v in n.metrics.items() if k.startswith("reward/")}
    assert set(terms) == set(env.reward_scales) and set(s.metrics) == set(n.metrics)
    np.testing.assert_allclose(float(n.reward), sum(float(v) for v in terms.values()), rtol=1e-6, atol=1e-7)


# reset_to keyword -> the observation entry (and its leading components) that shows where it was placed
PLACED = {"block_xy": ("block_pos", 2), "goal_xy": ("goal", 2), "bottom_xy": ("bottom_block_pos", 2),
          "target": ("target", 3)}


def test_fixed_reset_places_what_it_declares(env):
    """The parity harness's initial state shows each fixed quantity where the task declares it."""
    s = initial_state(env)
    at = env.observation_slices()
    for keyword, value in type(env).fixed_reset.items():
        entry, size = PLACED[keyword]
        np.testing.assert_allclose(np.asarray(s.obs[at[entry]])[:size], value, atol=1e-9, err_msg=keyword)
    with pytest.raises((ValueError, TypeError)):
        env.reset_to(jax.random.PRNGKey(0), not_a_quantity=jnp.zeros(2))


def test_scripted_controller_steps_one_world(env):
    fns = env.scripted_controller()
    if fns is None:
        pytest.skip(f"{env.name} declares no scripted controller")
    init, act = fns
    s = env.reset(jax.random.PRNGKey(2))
    _, action = jax.jit(act)(init(s), s)
    assert action.shape == (4,) and bool(jnp.all(jnp.isfinite(action)))


def test_consumers_derive_from_the_declaration(env):
    import so101_mjx.gym as sgym

    cls = type(env)
    gym_cls = sgym.ENV_CLASSES[cls.name]
    assert gym_cls.__name__ == cls.name.split("-v")[0] + "GymEnv" and getattr(sgym, gym_cls.__name__) is gym_cls
    for key in cls.markers.values():
        assert isinstance(getattr(gym_cls, f"{key}_pos"), property)
    layout = obs_layout(cls.name, env.observation_size, {})
    assert all(f"{name} ({size})" in layout for name, size in cls.observation_layout)
    assert "tiny" in presets.PRESETS[cls.name] and presets.default_preset(cls.name) in presets.PRESETS[cls.name]
    assert (cls.name in reference.mirrored()) == (cls.reference_env is not None)


def test_preset_lookup_names_what_exists():
    with pytest.raises(ValueError, match=r"expected one of \['cpu', 'gpu', 'tiny', 'tiny-sac'\]"):
        presets.preset("SO101Reach-v0", "huge")
    with pytest.raises(ValueError, match="unknown env"):
        presets.preset("SO101Nope-v0")


def test_the_registry_holds_the_builtin_tasks_by_their_names():
    assert len({cls.name for cls in BUILTIN}) == len(BUILTIN) == 5
    assert all(task(cls.name) is cls and cls.name in names() for cls in BUILTIN)
    assert not hasattr(SO101Env, "name")


def test_block_tasks_are_direct_subclasses_of_one_base():
    blocks = [cls for cls in BUILTIN if issubclass(cls, BlockTask)]
    assert ([cls.name for cls in blocks]
            == ["SO101PickCube-v0", "SO101PickPlace-v0", "SO101PushCube-v0", "SO101StackCube-v0"])
    assert all(cls.__bases__ == (BlockTask,) for cls in blocks)


def test_backend_options_are_forwarded_and_checked():
    assert make("SO101Reach-v0", "c", nthread=1).physics.nthread == 1
    with pytest.raises(ValueError, match="'impl' is an option of backend 'mjx', not of 'c'"):
        make("SO101Reach-v0", "c", impl="jax")
    with pytest.raises(ValueError, match="nthread must be"):
        make("SO101Reach-v0", "c", nthread=0)


def test_top_level_make_is_lazy():
    import subprocess
    import sys

    code = ("import sys, so101_mjx; assert 'jax' not in sys.modules; env = so101_mjx.make('SO101Reach-v0', 'c'); "
            "print(env.name)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "SO101Reach-v0"
