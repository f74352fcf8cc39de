"""Class-name facts of the X-TAIL and MTIL protocols that are not stored in the dataset files.

X-TAIL reads names verbatim from CoOp's split files and only adds two suffixes/wrappers
(EuroSAT, MNIST) [MoRAM XTAIL/scenario_datasets/eurosat.py, collections.py MNIST]. MTIL reads
names from torchvision's dataset classes, replaces ``_`` by a space, and hard-codes
descriptive names for Caltech101, EuroSAT and Flowers102 [ZSCL mtil/src/datasets/collections.py].
The tables below are those facts, keyed by the folder name (Caltech101, EuroSAT) or the label
index (Flowers102), so a partial tree still gets the right name for each class it has.
"""

from __future__ import annotations

#: MNIST class names as torchvision lists them (``MNIST.classes``).
MNIST_CLASSES = ("0 - zero", "1 - one", "2 - two", "3 - three", "4 - four", "5 - five",
                 "6 - six", "7 - seven", "8 - eight", "9 - nine")

#: X-TAIL appends this to every EuroSAT class name (train and test) [MoRAM eurosat.py].
XTAIL_EUROSAT_SUFFIX = " satellite location"


def xtail_mnist_name(name: str) -> str:
    """X-TAIL wraps MNIST names as ``number: "<name>"`` [MoRAM collections.py MNIST]."""
    return f'number: "{name}"'


def underscores_to_spaces(name: str) -> str:
    """MTIL's generic rewrite of torchvision class names [ZSCL collections.py process_labels]."""
    return name.replace("_", " ")


#: MTIL Caltech101 names by category folder (torchvision's sorted order, BACKGROUND_Google
#: excluded) [ZSCL collections.py Caltech101]. The double space in "head of a  crocodile" is
#: in the source and kept: it changes the tokenisation the published numbers were made with.
CALTECH101_MTIL = {
    'Faces': 'off-center face', 'Faces_easy': 'centered face', 'Leopards': 'leopard',
    'Motorbikes': 'motorbike', 'accordion': 'accordion', 'airplanes': 'airplane',
    'anchor': 'anchor', 'ant': 'ant', 'barrel': 'barrel', 'bass': 'bass', 'beaver': 'beaver',
    'binocular': 'binocular', 'bonsai': 'bonsai', 'brain': 'brain', 'brontosaurus': 'brontosaurus',
    'buddha': 'buddha', 'butterfly': 'butterfly', 'camera': 'camera', 'cannon': 'cannon',
    'car_side': 'side of a car', 'ceiling_fan': 'ceiling fan', 'cellphone': 'cellphone',
    'chair': 'chair', 'chandelier': 'chandelier', 'cougar_body': 'body of a cougar cat',
    'cougar_face': 'face of a cougar cat', 'crab': 'crab', 'crayfish': 'crayfish',
    'crocodile': 'crocodile', 'crocodile_head': 'head of a  crocodile', 'cup': 'cup',
    'dalmatian': 'dalmatian', 'dollar_bill': 'dollar bill', 'dolphin': 'dolphin',
    'dragonfly': 'dragonfly', 'electric_guitar': 'electric guitar', 'elephant': 'elephant',
    'emu': 'emu', 'euphonium': 'euphonium', 'ewer': 'ewer', 'ferry': 'ferry',
    'flamingo': 'flamingo', 'flamingo_head': 'head of a flamingo', 'garfield': 'garfield',
    'gerenuk': 'gerenuk', 'gramophone': 'gramophone', 'grand_piano': 'grand piano',
    'hawksbill': 'hawksbill', 'headphone': 'headphone', 'hedgehog': 'hedgehog',
    'helicopter': 'helicopter', 'ibis': 'ibis', 'inline_skate': 'inline skate',
    'joshua_tree': 'joshua tree', 'kangaroo': 'kangaroo', 'ketch': 'ketch', 'lamp': 'lamp',
    'laptop': 'laptop', 'llama': 'llama', 'lobster': 'lobster', 'lotus': 'lotus',
    'mandolin': 'mandolin', 'mayfly': 'mayfly', 'menorah': 'menorah', 'metronome': 'metronome',
    'minaret': 'minaret', 'nautilus': 'nautilus', 'octopus': 'octopus', 'okapi': 'okapi',
    'pagoda': 'pagoda', 'panda': 'panda', 'pigeon': 'pigeon', 'pizza': 'pizza',
    'platypus': 'platypus', 'pyramid': 'pyramid', 'revolver': 'revolver', 'rhino': 'rhino',
    'rooster': 'rooster', 'saxophone': 'saxophone', 'schooner': 'schooner', 'scissors': 'scissors',
    'scorpion': 'scorpion', 'sea_horse': 'sea horse', 'snoopy': 'snoopy (cartoon beagle)',
    'soccer_ball': 'soccer ball', 'stapler': 'stapler', 'starfish': 'starfish',
    'stegosaurus': 'stegosaurus', 'stop_sign': 'stop sign', 'strawberry': 'strawberry',
    'sunflower': 'sunflower', 'tick': 'tick', 'trilobite': 'trilobite', 'umbrella': 'umbrella',
    'watch': 'watch', 'water_lilly': 'water lilly', 'wheelchair': 'wheelchair',
    'wild_cat': 'wild cat', 'windsor_chair': 'windsor chair', 'wrench': 'wrench',
    'yin_yang': 'yin and yang symbol',
}

#: MTIL / CoOp Flowers102 names by label (imagelabels.mat label - 1) [ZSCL collections.py
#: Flowers; CoOp cat_to_name.json]. Not torchvision 0.29's ``Flowers102.classes``, whose
#: "pink-yellow dahlia?" has a stray question mark.
FLOWERS102 = (
    'pink primrose', 'hard-leaved pocket orchid', 'canterbury bells', 'sweet pea',
    'english marigold', 'tiger lily', 'moon orchid', 'bird of paradise', 'monkshood',
    'globe thistle', 'snapdragon', "colt's foot", 'king protea', 'spear thistle', 'yellow iris',
    'globe-flower', 'purple coneflower', 'peruvian lily', 'balloon flower',
    'giant white arum lily', 'fire lily', 'pincushion flower', 'fritillary', 'red ginger',
    'grape hyacinth', 'corn poppy', 'prince of wales feathers', 'stemless gentian', 'artichoke',
    'sweet william', 'carnation', 'garden phlox', 'love in the mist', 'mexican aster',
    'alpine sea holly', 'ruby-lipped cattleya', 'cape flower', 'great masterwort', 'siam tulip',
    'lenten rose', 'barbeton daisy', 'daffodil', 'sword lily', 'poinsettia', 'bolero deep blue',
    'wallflower', 'marigold', 'buttercup', 'oxeye daisy', 'common dandelion', 'petunia',
    'wild pansy', 'primula', 'sunflower', 'pelargonium', 'bishop of llandaff', 'gaura', 'geranium',
    'orange dahlia', 'pink-yellow dahlia', 'cautleya spicata', 'japanese anemone',
    'black-eyed susan', 'silverbush', 'californian poppy', 'osteospermum', 'spring crocus',
    'bearded iris', 'windflower', 'tree poppy', 'gazania', 'azalea', 'water lily', 'rose',
    'thorn apple', 'morning glory', 'passion flower', 'lotus', 'toad lily', 'anthurium',
    'frangipani', 'clematis', 'hibiscus', 'columbine', 'desert-rose', 'tree mallow', 'magnolia',
    'cyclamen', 'watercress', 'canna lily', 'hippeastrum', 'bee balm', 'ball moss', 'foxglove',
    'bougainvillea', 'camellia', 'mallow', 'mexican petunia', 'bromelia', 'blanket flower',
    'trumpet creeper', 'blackberry lily',
)

#: MTIL EuroSAT names by class folder [ZSCL collections.py EuroSAT].
EUROSAT_MTIL = {
    "AnnualCrop": "annual crop land", "Forest": "forest",
    "HerbaceousVegetation": "brushland or shrubland", "Highway": "highway or road",
    "Industrial": "industrial buildings or commercial buildings", "Pasture": "pasture land",
    "PermanentCrop": "permanent crop land",
    "Residential": "residential buildings or homes or apartments", "River": "river",
    "SeaLake": "lake or sea",
}


def oxford_pet_name(image_id: str) -> str:
    """torchvision's OxfordIIITPet class name from an image id: ``american_bulldog_12`` ->
    ``American Bulldog`` (MTIL uses these) [torchvision datasets/oxford_iiit_pet.py]."""
    breed = image_id.rsplit("_", 1)[0]
    return " ".join(part.title() for part in breed.split("_"))


def sun397_name(class_path: str) -> str:
    """torchvision's SUN397 name from a ClassName.txt line: ``/a/apartment_building/outdoor``
    -> ``apartment_building/outdoor`` [torchvision datasets/sun397.py]."""
    return class_path.strip()[3:]

