"""The text baselines' settings as data: each a frozen dataclass holding its paper's values, checked
when it is made, read by its strategy's signature and by its ``check_values`` (before the model is
touched); 0.6's dicts are read-only views of it."""

import dataclasses

import pytest

from moram_avalanche.strategies.options import strategy_parameters
from moram_avalanche.strategies.registry import get_strategy


def configs():
    """``(config class, its default setting, the values read from the papers' code by hand)``."""
    from moram_avalanche.strategies.text.plugins.lfpt5 import LFPT5_PLUGIN_SETTING, LFPT5PluginConfig
    from moram_avalanche.strategies.text.plugins.ogd import TRACE_OGD_SETTING, OGDConfig
    from moram_avalanche.strategies.text.plugins.olora import OLoRAConfig
    from moram_avalanche.strategies.text.sapt import SAPT_SETTING, SAPTConfig
    from moram_avalanche.text.dual_prompt import TREELORA_DUALPROMPT_SETTING, DualPromptConfig
    from moram_avalanche.text.lfpt5_prompt import LFPT5_PROMPT_SETTING, LFPT5PromptConfig
    from moram_avalanche.text.lora_layers import OLORA_LORA_SETTING, LoRALayerConfig
    from moram_avalanche.text.prompt_pool import TRACE_L2P_SETTING, L2PConfig

    return [
        # O-LoRA's LoraConfig(r=8, lora_alpha=32, lora_dropout=0.1)
        (LoRALayerConfig, OLORA_LORA_SETTING, dict(rank=8, scale=4.0, dropout=0.1)),
        # O-LoRA scripts/order_1.sh: lamda_1 0.5, lamda_2 0; its code's absolute values
        (OLoRAConfig, OLoRAConfig(), dict(lambda_orth=0.5, lambda_l2=0.0, power=1)),
        # SAPT gen_script_superni_t5.py: lora_r 4, lora_alpha 32, dropout 0, kl_ratio 0.5; query width 100
        (SAPTConfig, SAPT_SETTING, dict(rank=4, scale=8.0, dropout=0.0, kl_ratio=0.5, temperature=None,
                                        query_hidden=100)),
        # TRACE training/main.py and L2P.py: pool 10, length 5, top-k 3, pull 0.5; the initial prompts' embedding
        # rows undivided (model/Dynamic_network/L2P.py:31, convert_L2P_model since commit 2eedb15)
        (L2PConfig, TRACE_L2P_SETTING, dict(pool_size=10, prompt_length=5, top_k=3, pull_coef=0.5,
                                            prompt_init_divisor=1.0)),
        # TRACE model/Regular/OGD.py: one buffer appended at every step (OGD.py:141-142: one direction per task),
        # project_vec per LoRA parameter (OGD.py:53-71)
        (OGDConfig, TRACE_OGD_SETTING, dict(gradients_per_task=1, directions="last-steps",
                                            projection="per-parameter")),
        # TreeLoRA training/main.py: pool 10, G 2, E 3; the DualPrompt paper's matching weight 1
        (DualPromptConfig, TREELORA_DUALPROMPT_SETTING, dict(pool_size=10, g_length=2, e_length=3, match_coef=1.0)),
        # LFPT5 Classification.sh: --prompt_number 300, the prompt after the input, Adafactor
        (LFPT5PromptConfig, LFPT5_PROMPT_SETTING, dict(prompt_length=300, prompt_position="after",
                                                       prompt_init="labels", prompt_optimizer="adafactor")),
        # LFPT5 Classification.sh (--lm_lambda 0.25 --kd_lamda 0.01 --seed 42), model.py's sampling, 500 draws (ours)
        (LFPT5PluginConfig, LFPT5_PLUGIN_SETTING, dict(lm_lambda=0.25, kd_lambda=0.01, pseudo_per_label=2,
                                                       pseudo_draws=500, pseudo_top_k=64,
                                                       pseudo_repetition_penalty=2.5, pseudo_max_tokens=128,
                                                       lm_target_length=256, pseudo_seed=42)),
    ]


def test_each_setting_holds_its_papers_values_and_is_frozen():
    for cls, setting, expected in configs():
        assert dataclasses.asdict(setting) == expected, cls.__name__
        assert dataclasses.asdict(cls()) == expected  # the class's defaults are that setting
        name = next(iter(expected))
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(setting, name, expected[name])


# strategy -> the settings its keyword defaults come from
STRATEGY_SETTINGS = {"seq-lora": ["LoRALayerConfig"], "inc-lora": ["LoRALayerConfig"],
                     "o-lora": ["LoRALayerConfig", "OLoRAConfig"], "sapt": ["SAPTConfig"], "l2p": ["L2PConfig"],
                     "dualprompt": ["DualPromptConfig"], "lfpt5": ["LFPT5PromptConfig", "LFPT5PluginConfig"],
                     "ogd": ["LoRALayerConfig", "OGDConfig"]}


@pytest.mark.parametrize("name", sorted(STRATEGY_SETTINGS))
def test_a_strategys_defaults_are_its_settings(name):
    parameters = strategy_parameters(get_strategy(name, family="text"))
    by_name = {cls.__name__: expected for cls, _, expected in configs()}
    for config in STRATEGY_SETTINGS[name]:
        for option, value in by_name[config].items():
            assert parameters[option].default == value, (name, option)


class Untouchable:
    """A model that fails the test if a strategy reads anything from it."""

    def __getattr__(self, name):
        raise AssertionError(f"the model was touched ({name}) before the options were checked")


BAD = [
    ("seq-lora", {"dropout": 1.0}, "dropout must be a finite number in [0, 1) (probability of zeroing an input of "
                                   "the LoRA path; O-LoRA: 0.1), got 1.0"),
    ("inc-lora", {"scale": float("inf")}, "scale must be a finite number (O-LoRA: lora_alpha / r = 4), got inf"),
    ("o-lora", {"power": 3}, "power must be 1 (O-LoRA's code) or 2 (its paper), got 3"),
    ("o-lora", {"lambda_l2": {"mnli": -1.0}}, "lambda_l2['mnli'] must be a finite number >= 0"),
    ("sapt", {"kl_ratio": -1.0}, "kl_ratio must be a finite number >= 0 (SAPT: 0.5 (0: no reflection)), got -1.0"),
    ("sapt", {"pseudo_data_root": None}, "sapt: pseudo_data_root must be the folder of SAPT's pseudo-samples"),
    ("l2p", {"top_k": 11}, "top_k (11) chooses from the pool, so it must be at most pool_size (10)"),
    ("dualprompt", {"e_length": 0}, "e_length must be a positive int (TreeLoRA's DualPrompt: 3), got 0"),
    ("lfpt5", {"prompt_init": "zeros"}, "prompt_init must be one of ('labels', 'vocabulary') (LFPT5's code: "
                                        "'labels'), got 'zeros'"),
    ("lfpt5", {"pseudo_seed": -1}, "pseudo_seed must be an int in [0, 2147483647] (LFPT5: 42), got -1"),
    ("ogd", {"directions": "every-step"}, "directions must be one of ('last-steps', 'after-task') (TRACE's "
                                          "model/Regular/OGD.py: 'last-steps'), got 'every-step'"),
    ("l2p", {"prompt_init_divisor": 0}, "prompt_init_divisor must be a finite number > 0 (TRACE's L2P: 1, its "
                                        "superseded commit and 0.6: 100), got 0"),
    ("lori-d", {"loss_reduction": "sum"}, "loss_reduction must be one of ('token-mean', 'example-sum') (LoRI's "
                                          "src/mask_trainers.py: 'example-sum'), got 'sum'"),
]


@pytest.mark.parametrize("name, given, message", BAD, ids=[f"{b[0]}-{next(iter(b[1]))}" for b in BAD])
def test_bad_settings_are_refused_before_the_model_is_touched(name, given, message):
    with pytest.raises(ValueError) as info:
        get_strategy(name, family="text")(model=Untouchable(), tokenizer=Untouchable(), **given)
    assert message in str(info.value)


def test_given_config_reads_the_options_it_declares_and_checks_them():
    from moram_avalanche.strategies.text.settings import given_config
    from moram_avalanche.text.prompt_pool import L2PConfig

    config = given_config(L2PConfig, {"top_k": 2, "lr": 1e-3, "pool_size": 4})  # lr: not L2P's
    assert (config.pool_size, config.prompt_length, config.top_k, config.pull_coef) == (4, 5, 2, 0.5)
    with pytest.raises(ValueError, match=r"top_k \(5\) .* at most pool_size \(4\)"):
        given_config(L2PConfig, {"top_k": 5, "pool_size": 4})


def test_the_plugins_build_their_settings_once():
    from moram_avalanche.strategies.text.plugins.lfpt5 import LFPT5Plugin, LFPT5PluginConfig
    from moram_avalanche.strategies.text.plugins.olora import OLoRAConfig, OLoRAPlugin

    plugin = OLoRAPlugin(lambda_orth={"mnli": 1}, lambda_l2=0)
    assert plugin.config == OLoRAConfig({"mnli": 1}, 0, 1)
    assert plugin.lambda_orth == {"mnli": 1.0} and type(plugin.lambda_orth["mnli"]) is float
    assert plugin.lambda_l2 == 0.0 and type(plugin.lambda_l2) is float
    lfpt5 = LFPT5Plugin(pseudo_draws=7, kd_lambda=0.5)
    assert lfpt5.config == LFPT5PluginConfig(pseudo_draws=7, kd_lambda=0.5)
    assert (lfpt5.draws, lfpt5.kd_lambda, lfpt5.lm_lambda) == (7, 0.5, 0.25)
    with pytest.raises(ValueError, match=r"pseudo_draws must be an int in \[1, 100000\]"):
        LFPT5Plugin(pseudo_draws=10 ** 6)


def test_0_6s_dicts_are_read_only_views_with_the_old_keys():
    from moram_avalanche.strategies.text.sapt import SAPT_LORA
    from moram_avalanche.text import OLORA_LORA
    from moram_avalanche.text.dual_prompt import TREELORA_DUALPROMPT
    from moram_avalanche.text.prompt_pool import TRACE_L2P

    assert dict(OLORA_LORA) == {"rank": 8, "scale": 4.0, "dropout": 0.1}
    assert dict(SAPT_LORA) == {"rank": 4, "scale": 8.0, "dropout": 0.0}
    assert dict(TRACE_L2P) == {"pool_size": 10, "prompt_length": 5, "top_k": 3, "pull_coef": 0.5}
    assert dict(TREELORA_DUALPROMPT) == {"pool_size": 10, "g_length": 2, "e_length": 3, "match_coef": 1.0}
    for view in (OLORA_LORA, SAPT_LORA, TRACE_L2P, TREELORA_DUALPROMPT):
        with pytest.raises(TypeError):
            view["rank"] = 1
