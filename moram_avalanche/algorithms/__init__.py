"""Framework-free baseline math: no Avalanche (torch, and torchvision for DDAS's AlexNet).

DualGPM memories and input covariances (InfLoRA), DDAS (MoE-Adapters' router selector),
weight copies (WiSE-FT, ZSCL), distillation losses and frozen teachers (LwF, ZSCL), the CLIP
continual loss, learning-rate schedules, LwF-VR's virtual vocabulary, RAIL's analytic heads,
CoDyRA's rank selection, iCaRL's herding.
"""

from .analytic import (
                       DUAL_REGULARIZATION,
                       FUSION_WEIGHT,
                       HIDDEN_DIM,
                       KERNELS,
                       PRIMAL_REGULARIZATION,
                       RBF_GAMMA,
                       KernelRidge,
                       RandomFeatures,
                       RecursiveRidge,
                       fuse_with_zero_shot,
                       kernel_matrix,
)
from .covariance import InputCovariance, input_covariances
from .ddas import (
                       DDAS,
                       FEW_SHOT_THRESHOLD,
                       FULL_SHOT_THRESHOLD,
                       DomainAutoencoder,
                       alexnet_features,
                       random_conv_features,
)
from .distillation import distillation, two_way_distillation
from .dualgpm import LAMBDA_B, LAMBDA_E, DualGPM, design_down_projection, threshold
from .herding import herding_order
from .losses import clip_continual_loss
from .rank_selection import DENSE_FRACTION, KAPPA_STEPS, MAX_KAPPA, kappa_at, prunes_at, soft_threshold_gates_
from .schedules import (
                       LR_SCHEDULES,
                       MOE_FEWSHOT_MTIL_LR,
                       MOE_FULLSHOT_MTIL_LR,
                       ZSCL_MTIL_LR,
                       DomainLR,
                       cosine_lr_factor,
                       quarter_cosine_lr_factor,
)
from .teacher import FrozenCLIP
from .virtual_vocab import virtual_vocabulary
from .weight_copy import PLACES, WeightCopy, check_place

__all__ = ["DDAS", "DENSE_FRACTION", "KAPPA_STEPS", "MAX_KAPPA", "kappa_at", "prunes_at", "soft_threshold_gates_",
           "DUAL_REGULARIZATION", "FUSION_WEIGHT", "HIDDEN_DIM", "KERNELS", "PRIMAL_REGULARIZATION",
           "RBF_GAMMA", "KernelRidge", "RandomFeatures", "RecursiveRidge", "fuse_with_zero_shot", "kernel_matrix", "FEW_SHOT_THRESHOLD", "FULL_SHOT_THRESHOLD", "LAMBDA_B", "LAMBDA_E", "LR_SCHEDULES",
           "MOE_FEWSHOT_MTIL_LR", "MOE_FULLSHOT_MTIL_LR", "PLACES", "ZSCL_MTIL_LR", "DomainAutoencoder",
           "DomainLR", "DualGPM", "FrozenCLIP", "InputCovariance", "WeightCopy", "alexnet_features",
           "check_place", "clip_continual_loss", "cosine_lr_factor", "design_down_projection",
           "distillation", "herding_order", "input_covariances", "quarter_cosine_lr_factor", "random_conv_features",
           "threshold", "two_way_distillation", "virtual_vocabulary"]
