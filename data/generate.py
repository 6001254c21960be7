#!/usr/bin/env python3
"""Deterministic generator for the project's own birth-place dataset.

The course data for this assignment cannot ship with the project, so this script builds a
world of its own with the same shape:

* ``wiki.txt``: one short biography per line, ``Name. <one sentence about them> .``, no
  trailing newline (the pretraining corpus);
* ``birth_places_train.tsv`` / ``birth_dev.tsv``: ``Where was NAME born?<TAB>PLACE`` rows;
* ``birth_test_inputs.tsv``: ``Where was NAME born?`` rows (no answers);
* ``birth_test.tsv``: the test answers (the world is ours, so they ship too).

With ``mentions=K`` (the quick preset's world; the shipped, course-sized world has none),
wiki.txt also gets K short lines per person, after the biographies, that name the person
and their birth place inside an article about something else (see MENTION_BODIES).

The people are fictional: their names are assembled from name parts written for this file.
The places are real cities and countries (facts of the world).  Every sentence template,
occupation, topic and title below was written for this project.

Usage::

    python data/generate.py                 # regenerate the files next to this script
    python data/generate.py --out DIR       # write them somewhere else
    python data/generate.py --stats         # Markdown table: ours vs the course data
    python data/generate.py --out DIR --people 400 --train 100 --dev 200 --test 100 --seed 7
    python data/generate.py --out DIR --people 520 --train 300 --dev 200 --test 20 --mentions 2

From Python (e.g. for small "quick preset" worlds)::

    generate(out_dir, n_people=400, seed=7, n_train=100, n_dev=200, n_test=100, mentions=2)

Standard library only; the output depends only on the arguments.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import math
import random
import statistics
import sys
import unicodedata
from pathlib import Path

HERE = Path(__file__).resolve().parent

DEFAULT_SEED = 2937
COURSE_SPLITS = (2000, 500, 437)  # train / dev / test rows of the course data
COURSE_PEOPLE = sum(COURSE_SPLITS)
SEEN_CHARS = 112  # int(128 * 7 / 8): the longest prefix of a document pretraining ever sees
AFTER_NAME = 10  # in "Name. Born in X" the place starts 10 characters after the name

FILES = ("wiki.txt", "birth_places_train.tsv", "birth_dev.tsv",
         "birth_test_inputs.tsv", "birth_test.tsv")

# Share of question people per split whose biography never names the birth place
# (unanswerable) and whose biography names it only after the first SEEN_CHARS characters.
ABSENT_RATE = 0.045
LATE_RATE = 0.035

# Share of biographies naming the birth place early that open "Name. Born in X, ...": the
# course's documents do so often (the `dev: birth place right after the name` statistic), and
# a place right after the name is the easiest fact to reach from a question about that name.
OPENER_RATE = 0.15

# Document lengths are drawn from a log-normal law (median ~132 characters).
LEN_MU, LEN_SIGMA, LEN_MIN, LEN_MAX = 4.85, 0.39, 38, 520

# Birth places follow a Zipf-like law over the place list below (rank r has weight
# 1 / (r + ZIPF_B) ** ZIPF_S); ranks come from HEAD_PLACES, then the rest in a fixed shuffle.
ZIPF_S, ZIPF_B = 1.1, 5.0
PLACE_ORDER_SEED = 11

# ---------------------------------------------------------------------------------------
# Places: real cities, grouped by the region shown after a comma ("*": shown alone), and
# countries.
# No place name is a substring of another one (checked by _check_places).
# ---------------------------------------------------------------------------------------

CITIES_TEXT = """
England: London, Manchester, Liverpool, Leeds, Sheffield, Bristol, Birmingham, Newcastle
    upon Tyne, Nottingham, Leicester, Coventry, Bradford, Southampton, Portsmouth, Plymouth,
    Brighton, Oxford, Cambridge, Norwich, Exeter, Derby, Sunderland, Middlesbrough, Bolton,
    Preston, Blackburn, Wigan, Stockport, Oldham, Huddersfield, Wakefield, Doncaster,
    Ipswich, Cheltenham, Gloucester, Worcester, Hereford, Shrewsbury, Carlisle, Durham,
    Lancaster, Canterbury, Dover, Salisbury, Hull
Scotland: Glasgow, Edinburgh, Aberdeen, Dundee, Inverness, Stirling, Paisley
Wales: Cardiff, Swansea, Newport, Wrexham, Bangor
Northern Ireland: Belfast, Derry, Armagh
Ireland: Dublin, Cork, Limerick, Galway, Waterford, Kilkenny, Sligo, Drogheda, Wexford
France: Paris, Lyon, Marseille, Toulouse, Bordeaux, Lille, Nantes, Strasbourg, Montpellier,
    Rennes, Reims, Le Havre, Grenoble, Dijon, Angers, Nîmes, Clermont-Ferrand, Limoges,
    Tours, Amiens, Metz, Besançon, Orléans, Rouen, Caen, Avignon, Toulon, Perpignan, Brest,
    Bayonne, Ajaccio
Germany: Berlin, Hamburg, Munich, Cologne, Frankfurt, Stuttgart, Düsseldorf, Dortmund,
    Essen, Leipzig, Bremen, Dresden, Hanover, Nuremberg, Duisburg, Bochum, Wuppertal, Bonn,
    Münster, Karlsruhe, Mannheim, Augsburg, Wiesbaden, Kiel, Lübeck, Rostock, Freiburg,
    Heidelberg, Mainz, Kassel, Erfurt, Weimar, Potsdam, Magdeburg, Regensburg, Würzburg,
    Göttingen, Trier, Aachen, Chemnitz, Jena
Austria: Vienna, Graz, Linz, Salzburg, Innsbruck, Klagenfurt
Switzerland: Zürich, Geneva, Basel, Bern, Lausanne, Lucerne, Lugano
Netherlands: Amsterdam, Rotterdam, The Hague, Utrecht, Eindhoven, Groningen, Leiden,
    Haarlem, Delft, Maastricht, Nijmegen, Arnhem, Tilburg
Belgium: Brussels, Antwerp, Ghent, Bruges, Liège, Leuven, Namur, Charleroi, Mechelen
Italy: Rome, Milan, Naples, Turin, Palermo, Genoa, Bologna, Florence, Venice, Verona, Padua,
    Trieste, Bari, Catania, Messina, Parma, Modena, Pisa, Siena, Cagliari, Brescia, Bergamo,
    Livorno, Ravenna, Lecce, Salerno, Ferrara, Trento, Udine
Spain: Madrid, Barcelona, Valencia, Seville, Zaragoza, Málaga, Bilbao, Córdoba, Granada,
    Alicante, Valladolid, Vigo, Gijón, Salamanca, Toledo, Cádiz, Pamplona, San Sebastián,
    Santander, Oviedo, Murcia
Portugal: Lisbon, Porto, Coimbra, Braga, Faro, Funchal, Évora, Aveiro
Norway: Oslo, Bergen, Trondheim, Stavanger, Tromsø, Drammen, Kristiansand
Sweden: Stockholm, Gothenburg, Malmö, Uppsala, Linköping, Örebro, Umeå, Västerås
Denmark: Copenhagen, Aarhus, Odense, Aalborg
Finland: Helsinki, Turku, Tampere, Oulu
Iceland: Reykjavík, Akureyri
Poland: Warsaw, Kraków, Łódź, Wrocław, Poznań, Gdańsk, Szczecin, Lublin, Katowice,
    Białystok, Toruń
Czech Republic: Prague, Brno, Ostrava, Plzeň, Olomouc
Slovakia: Bratislava, Košice
Hungary: Budapest, Debrecen, Szeged, Pécs, Győr, Miskolc
Romania: Bucharest, Cluj-Napoca, Timișoara, Iași, Brașov, Constanța, Sibiu
Bulgaria: Plovdiv, Varna, Burgas
Serbia: Belgrade, Novi Sad, Niš
Croatia: Zagreb, Rijeka
Slovenia: Ljubljana, Maribor
Bosnia and Herzegovina: Sarajevo, Mostar
North Macedonia: Skopje
Montenegro: Podgorica
Albania: Tirana
Greece: Athens, Thessaloniki, Patras, Heraklion, Volos
Cyprus: Nicosia
Malta: Valletta
Latvia: Riga
Estonia: Tallinn, Tartu
Lithuania: Vilnius, Kaunas
Ukraine: Kyiv, Kharkiv, Odesa, Lviv, Dnipro
Belarus: Minsk
Moldova: Chișinău
Russia: Moscow, Saint Petersburg, Novosibirsk, Yekaterinburg, Kazan, Nizhny Novgorod,
    Samara, Omsk, Rostov-on-Don, Vladivostok, Irkutsk, Perm, Volgograd, Murmansk,
    Kaliningrad
Georgia: Tbilisi, Batumi, Atlanta, Savannah
Armenia: Yerevan
Azerbaijan: Baku
Turkey: Istanbul, Ankara, İzmir, Bursa, Adana, Antalya, Trabzon, Konya
Lebanon: Beirut
Syria: Damascus, Aleppo
Jordan: Amman
*: Jerusalem, Kinshasa, Lubumbashi, Brazzaville, Conakry, Hong Kong, Macau, Canberra, New
    York City, Quebec City, Mexico City, Panama City
Israel: Tel Aviv, Haifa
Iraq: Baghdad, Basra, Mosul
Iran: Tehran, Isfahan, Shiraz, Tabriz, Mashhad
Kuwait: Kuwait City
Qatar: Doha
United Arab Emirates: Dubai, Abu Dhabi
Oman: Muscat
Saudi Arabia: Riyadh, Jeddah
Bahrain: Manama
Egypt: Cairo, Alexandria, Giza, Luxor, Aswan
Libya: Tripoli, Benghazi
Tunisia: Tunis, Sfax
Algeria: Algiers, Oran
Morocco: Casablanca, Rabat, Marrakesh, Fez, Tangier
Senegal: Dakar
Mali: Bamako
Ghana: Accra, Kumasi
Nigeria: Lagos, Ibadan, Kano, Abuja, Enugu
Cameroon: Douala, Yaoundé
Angola: Luanda
Kenya: Nairobi, Mombasa
Uganda: Kampala
Rwanda: Kigali
Tanzania: Dar es Salaam, Zanzibar
Ethiopia: Addis Ababa
Sudan: Khartoum
Zimbabwe: Harare, Bulawayo
Zambia: Lusaka
Mozambique: Maputo
South Africa: Johannesburg, Cape Town, Durban, Pretoria, Port Elizabeth, Bloemfontein
Namibia: Windhoek
Botswana: Gaborone
Madagascar: Antananarivo
Mauritius: Port Louis
Ivory Coast: Abidjan
Sierra Leone: Freetown
Liberia: Monrovia
Burkina Faso: Ouagadougou
Togo: Lomé
Benin: Cotonou
Eritrea: Asmara
Somalia: Mogadishu
Malawi: Lilongwe, Blantyre
India: Mumbai, Delhi, Kolkata, Chennai, Bangalore, Hyderabad, Ahmedabad, Pune, Jaipur,
    Lucknow, Kanpur, Nagpur, Patna, Bhopal, Surat, Amritsar, Varanasi, Kochi,
    Thiruvananthapuram, Mysore, Madurai, Shimla, Dehradun
Pakistan: Karachi, Lahore, Islamabad, Peshawar, Rawalpindi, Faisalabad, Multan, Quetta
Bangladesh: Dhaka, Chittagong
Nepal: Kathmandu
Sri Lanka: Colombo, Kandy
Bhutan: Thimphu
Afghanistan: Kabul, Herat, Kandahar
Uzbekistan: Tashkent, Samarkand
Kazakhstan: Almaty
Kyrgyzstan: Bishkek
China: Beijing, Shanghai, Guangzhou, Shenzhen, Tianjin, Wuhan, Chengdu, Chongqing, Nanjing,
    Hangzhou, Xi'an, Harbin, Shenyang, Dalian, Qingdao, Kunming, Xiamen, Suzhou, Changsha
Taiwan: Taipei, Kaohsiung, Tainan
Japan: Tokyo, Osaka, Kyoto, Yokohama, Kobe, Nagoya, Sapporo, Fukuoka, Hiroshima, Nagasaki,
    Sendai
South Korea: Seoul, Busan, Incheon, Daegu, Gwangju
North Korea: Pyongyang
Mongolia: Ulaanbaatar
Thailand: Bangkok, Chiang Mai
Vietnam: Hanoi, Ho Chi Minh City, Da Nang
Cambodia: Phnom Penh
Laos: Vientiane
Myanmar: Yangon, Mandalay
Malaysia: Kuala Lumpur, George Town
Indonesia: Jakarta, Surabaya, Bandung, Medan, Yogyakarta, Denpasar
Philippines: Manila, Cebu, Davao
New South Wales: Sydney, Wollongong
Victoria: Melbourne, Geelong, Ballarat
Queensland: Brisbane, Townsville
Western Australia: Perth
South Australia: Adelaide
Tasmania: Hobart
Northern Territory: Darwin
New Zealand: Auckland, Wellington, Christchurch, Dunedin
Fiji: Suva
Papua New Guinea: Port Moresby
New Caledonia: Nouméa
Samoa: Apia
Illinois: Chicago, Peoria, Evanston
Pennsylvania: Philadelphia, Pittsburgh, Scranton, Erie
Massachusetts: Boston
Maryland: Baltimore, Annapolis
Michigan: Detroit, Grand Rapids, Flint
Minnesota: Minneapolis, Duluth
California: Los Angeles, San Francisco, Sacramento, San Diego, Oakland, Pasadena, Fresno
Washington: Seattle, Spokane, Tacoma
Oregon: Portland
Colorado: Denver
Ohio: Cleveland, Cincinnati, Columbus, Dayton, Akron
Missouri: St. Louis, Kansas City
Wisconsin: Milwaukee, Madison
Louisiana: New Orleans, Baton Rouge
Texas: Houston, Dallas, San Antonio, Austin, El Paso, Galveston
Arizona: Phoenix, Tucson
Utah: Salt Lake City
Nebraska: Omaha, Lincoln
Kentucky: Louisville, Lexington
Tennessee: Nashville, Memphis, Knoxville, Chattanooga
South Carolina: Charleston
Virginia: Richmond, Norfolk
New York: Buffalo, Rochester, Albany, Syracuse, Brooklyn
Connecticut: Hartford, New Haven
Rhode Island: Providence
New Jersey: Newark
Hawaii: Honolulu
Alaska: Anchorage, Juneau
Florida: Miami, Tampa
Iowa: Des Moines
Idaho: Boise
New Mexico: Albuquerque
Oklahoma: Tulsa
Kansas: Wichita
Arkansas: Little Rock
North Carolina: Raleigh
North Dakota: Fargo
Wyoming: Cheyenne
Montana: Butte
Nevada: Reno
Vermont: Burlington
Delaware: Wilmington
Ontario: Toronto, Ottawa, Hamilton, Thunder Bay
Quebec: Montreal, Sherbrooke
British Columbia: Vancouver
Manitoba: Winnipeg
Alberta: Calgary, Edmonton
Nova Scotia: Halifax
Saskatchewan: Regina, Saskatoon
Newfoundland: St. John's
New Brunswick: Fredericton, Moncton
Mexico: Guadalajara, Monterrey, Puebla, Tijuana, Mérida, Oaxaca, Veracruz, Querétaro
Cuba: Havana
Jamaica: Kingston
Puerto Rico: San Juan
Dominican Republic: Santo Domingo
Haiti: Port-au-Prince
El Salvador: San Salvador
Honduras: Tegucigalpa
Nicaragua: Managua
Costa Rica: San José
Colombia: Bogotá, Medellín, Barranquilla, Cartagena
Venezuela: Caracas, Maracaibo
Ecuador: Quito, Guayaquil
Peru: Lima, Cusco, Arequipa
Bolivia: La Paz
Paraguay: Asunción
Uruguay: Montevideo
Argentina: Buenos Aires, Rosario, Mendoza, La Plata
Chile: Santiago, Valparaíso, Concepción
Brazil: São Paulo, Rio de Janeiro, Brasília, Belo Horizonte, Recife, Fortaleza, Curitiba,
    Manaus, Belém
Guyana: Georgetown
Suriname: Paramaribo
Barbados: Bridgetown
Bahamas: Nassau
"""

COUNTRIES_TEXT = """
England, Scotland, Wales, Ireland, France, Germany, Italy, Spain, Portugal, Netherlands,
Belgium, Switzerland, Austria, Poland, Hungary, Romania, Bulgaria, Greece, Sweden, Norway,
Denmark, Finland, Iceland, Russia, Ukraine, Turkey, Egypt, Lebanon, Syria, Israel, Iran,
Iraq, India, Pakistan, Bangladesh, Sri Lanka, Nepal, China, Japan, South Korea, Philippines,
Indonesia, Vietnam, Thailand, Malaysia, Singapore, Australia, New Zealand, Canada, United
States, Brazil, Argentina, Chile, Colombia, Venezuela, Peru, Bolivia, Uruguay, Ecuador,
Cuba, Jamaica, Nigeria, Ghana, Kenya, South Africa, Ethiopia, Morocco, Algeria, Uganda,
Tanzania, Zimbabwe, Serbia, Croatia, Slovenia, Estonia, Latvia, Lithuania, Armenia, Cyprus,
Malta, Luxembourg, Monaco, Slovakia
"""

# The most common birth places, most common first; every other place follows in a fixed
# pseudo-random order (PLACE_ORDER_SEED), so the distribution does not depend on the seed.
HEAD_PLACES = [
    "London", "Paris", "Chicago", "England", "New York City", "Sydney", "Melbourne",
    "Toronto", "Dublin", "Berlin", "Budapest", "Montreal", "Glasgow", "Philadelphia",
    "Vienna", "France", "Boston", "Edinburgh", "Milan", "Rome", "India", "Australia",
    "Manchester", "Naples", "Los Angeles", "Oslo", "Baltimore", "Birmingham", "Liverpool",
    "Stockholm", "Germany", "Moscow", "Belfast", "Amsterdam", "Brooklyn", "Scotland",
    "Detroit", "Copenhagen", "Italy", "Warsaw", "Prague", "Mumbai", "Tokyo", "Buenos Aires",
    "Canada", "San Francisco", "Cleveland", "Helsinki", "Bucharest", "Munich", "Hamburg",
    "Madrid", "Barcelona", "Lisbon", "Athens", "Istanbul", "Cairo", "Beijing", "Shanghai",
    "Wales", "Ireland", "Leeds", "Bristol", "Sheffield", "Minneapolis", "Pittsburgh",
    "Cardiff", "Cork", "Lyon", "Marseille", "Brussels", "Zürich", "Geneva",
]


def _parse_places():
    """name -> (region shown after a comma or None, "city" | "country")."""
    places = {}

    def add(name, region, kind):
        if not name or name in places:
            raise ValueError(f"empty or duplicate place {name!r}")
        places[name] = (region, kind)

    for entry in CITIES_TEXT.replace("\n    ", " ").strip().split("\n"):
        region, names = entry.split(": ")
        for name in names.split(", "):
            add(name, None if region == "*" else region, "city")
    for name in " ".join(COUNTRIES_TEXT.split()).split(", "):
        add(name, None, "country")
    return places


PLACES = _parse_places()


def _place_ranking():
    if len(set(HEAD_PLACES)) != len(HEAD_PLACES) or not set(HEAD_PLACES) <= set(PLACES):
        raise ValueError("HEAD_PLACES must be distinct known places")
    rest = sorted(p for p in PLACES if p not in set(HEAD_PLACES))
    random.Random(PLACE_ORDER_SEED).shuffle(rest)
    return HEAD_PLACES + rest


PLACE_RANKING = _place_ranking()


def _check_places():
    names = list(PLACES)
    for a in names:
        for b in names:
            if a != b and a in b:
                raise ValueError(f"place {a!r} is part of place {b!r}")


_check_places()

# ---------------------------------------------------------------------------------------
# Name parts (written for this project).  A style has given names by pronoun and surname
# pieces (prefix + suffix); some styles add particles used in longer names.
# ---------------------------------------------------------------------------------------

NAME_STYLES = {
    "anglo": dict(
        weight=30,
        he="Alder Barnaby Callum Dorran Edwin Finlay Garrett Harlan Ivor Jasper Keegan Lowell "
           "Merrick Nolan Oswin Percival Quentin Rowan Silas Tobias Wystan Emory Ansel Brock "
           "Conrad Declan Everett Gideon Hollis Linus".split(),
        she="Ada Briony Cordelia Delia Edith Fenella Gwen Harriet Imogen Juniper Keira Lorna "
            "Maude Nell Orla Philippa Rosalind Tamsin Winifred Wren Elspeth Hazel Mabel "
            "Thea".split(),
        pre="Ash Black Brad Brook Carr Cold Dal Dun Eld Fair Fen Gold Grim Hal Hart Hollo Kel "
            "Kings Lang Mar Mill Nor Oak Pem Pres Rad Ren Sel Shel Stan Thorn Wal Wend Whit "
            "Win Bright Crom Hather Lock Rother".split(),
        suf="ford ley ton wick more well by ham field stead brook wood ridge den sley croft "
            "worth combe dale shaw".split(),
        particles=[],
    ),
    "germanic": dict(
        weight=12,
        he="Anselm Bertolt Dietmar Egon Falko Gunther Helmut Jörg Klaus Lothar Matthias Otmar "
           "Rainer Sigmund Ulrich Volker Wendelin Jürgen Eckart Hartmut".split(),
        she="Adelheid Brigitte Dagmar Elke Frauke Gudrun Hildegard Ilse Jutta Liesel Margit "
            "Renate Sieglinde Ute Wiebke Jördis Almut Henrike".split(),
        pre="Brenn Kessel Alt Eichen Hoch Lind Rosen Stein Wald Falk Grün Mühl Kranz Schön Tann "
            "Weiss Zell Hassel Rott Bär Kiefer Drossel".split(),
        suf="berg mann bach hof hauer dorf er inger wald heim kamp haus meier stätter brunner "
            "hardt".split(),
        particles=["von", "van", "van der"],
    ),
    "nordic": dict(
        weight=10,
        he="Arvid Bjarne Eskil Finnur Gunnar Halvard Ingvar Jens Knut Leif Magnus Njål Ove "
           "Sindre Torbjørn Ulf Vidar Øystein Åsmund Eirik".split(),
        she="Astrid Birgit Dagny Eira Frøydis Gunhild Hedda Ingrid Jorunn Kari Liv Maren "
            "Ragnhild Siv Solveig Tove Åse Ylva Sigrun".split(),
        pre="Berg Dahl Ek Fjell Hol Lind Nord Ros Sol Strand Vik Sand Aas Bratt Øver Sjø "
            "Lyng Skog".split(),
        suf="gaard ström sen qvist holm sø rud stad ness bakken heim dal lie øy vold".split(),
        particles=[],
    ),
    "iberian": dict(
        weight=12,
        he="Álvaro Benigno Ciro Dámaso Eloy Fausto Gonzalo Hernán Íñigo Joaquín Leandro "
           "Marcelo Nuño Octavio Rodrigo Tadeo Valentín Xabier Anselmo Baltasar".split(),
        she="Alba Begoña Candela Dolores Elvira Fátima Graciela Inés Jimena Lucía Maite "
            "Nieves Paloma Rocío Soledad Yolanda Ximena Ariadna Amparo".split(),
        pre="Alv Barr Cerv Dom Estr Ferr Galv Ib Lor Mend Quint Sanch Vald Mor Carv Peñ Ur "
            "Zam Arr Sot".split(),
        suf="ez ado era eiro áñez ón ales ino uña ía edo oso ante arro ejo".split(),
        particles=["de", "del", "da", "dos"],
    ),
    "italian": dict(
        weight=10,
        he="Amedeo Bruno Corrado Dario Ettore Fabrizio Gianluca Ilario Lapo Massimo Nereo "
           "Ottavio Piero Renzo Saverio Tullio Ugo Vittorio Cosimo".split(),
        she="Agnese Bianca Chiara Donatella Elisa Fiamma Giuliana Ilaria Letizia Marisa Nives "
            "Ornella Pia Rosalba Serena Teodora Vanna Carmela".split(),
        pre="Bell Cast Cor Fior Gall Lomb Marz Ross Salv Ton Vent Bard Cann Pagan Serr Tav "
            "Zan Brun Fer Spad".split(),
        suf="ini etti ello ucci one ano azzi ieri otti aro ese elli occhi ardi".split(),
        particles=["di", "da", "de"],
    ),
    "french": dict(
        weight=10,
        he="Aurélien Bastien Célestin Damien Éloi Fabien Gaspard Hervé Jérôme Lucien Mathis "
           "Noël Octave Pascal Rémi Sylvain Thibault Yves Anatole".split(),
        she="Aurore Bérénice Camille Delphine Éloïse Fanny Geneviève Hélène Inès Joëlle Léa "
            "Mireille Noémie Odile Perrine Solène Véronique Maëlle Clémence".split(),
        pre="Beau Ch Dur Fon Lef Mar Mont Roch Val Bou Gir Lam Per Vaill Dess Fouc Thér "
            "Lebr Cour".split(),
        suf="eau ier ette ard elle ot ère on and ain in as oux aud ençon".split(),
        particles=["de", "du", "de la"],
    ),
    "slavic": dict(
        weight=10,
        he="Bogdan Borys Dariusz Dmitar Goran Jaromír Kazimierz Lubomír Miroslav Radek "
           "Stanisław Tomislav Zdeněk Witold Ostap Bohdan Wojciech Dušan".split(),
        she="Agnieszka Bożena Danuta Dragana Halina Ivana Jadwiga Katarzyna Ljiljana Milena "
            "Nadia Olesya Radka Svetlana Wanda Zofia Zuzana Vesna Jelena".split(),
        pre="Bor Dob Kras Lub Nov Rad Stan Vel Zor Kow Wis Grab Hor Sok Jar Ter Pol Zel "
            "Mar Kul".split(),
        suf="ović ski enko ek ič czak iak ov in owski ecki ák ar uk".split(),
        particles=[],
    ),
    "finnish": dict(
        weight=3,
        he="Aarne Eino Kalevi Teemu Veikko Onni Pekka Lauri".split(),
        she="Aino Kaisa Riikka Noora Helmi Sirkka Tuula Elina".split(),
        pre="Koski Mäki Niemi Salo Virta Kallio Vaara Lehto Rinne Hakka".split(),
        suf="nen la maa lainen vuori järvi".split(),
        particles=[],
    ),
    "greek": dict(
        weight=3,
        he="Dimitris Stavros Yiannis Petros Lefteris Manolis Spyros Christos".split(),
        she="Eleni Despina Kalliope Eirini Fotini Chrysa Vasiliki Zoe".split(),
        pre="Papado Konstan Diaman Karagi Mavro Vlach Stath Andre Lefter".split(),
        suf="akis poulos idis opoulos os ou".split(),
        particles=[],
    ),
    "hungarian": dict(
        weight=3,
        he="Lajos Tibor Zoltán Ödön Levente Gyula Barnabás Csaba".split(),
        she="Ildikó Réka Zsófia Enikő Hajnal Piroska Boglárka Kinga".split(),
        pre="Kov Szab Nagy Tót Vár Hor Fekete Bal Sár Kel".split(),
        suf="ács ó ai esi ényi ossy ári".split(),
        particles=[],
    ),
    "turkish": dict(
        weight=3,
        he="Emre Kaan Oğuz Tarık Volkan Selim Cem Barış".split(),
        she="Elif Derya Ayşe Nilüfer Sevgi Gülşen Pınar Esra".split(),
        pre="Yıl Akt Kar Öz Demir Çel Şah Yaz".split(),
        suf="maz an ürk oğlu dağ er can kaya".split(),
        particles=[],
    ),
}

MONONYM_PARTS = (
    "Ka Vel Or Mi Zan Tor Lu Ser Quil Bra Esk Jor".split(),
    "ivo anda elio usto ara emir onne ath".split(),
)

# ---------------------------------------------------------------------------------------
# Biography vocabulary (written for this project).
# ---------------------------------------------------------------------------------------

OCCUPATIONS = {
    "arts": "painter|sculptor|composer|violinist|jazz pianist|novelist|poet|journalist|"
            "translator|photographer|film director|stage actor|illustrator|cartoonist|"
            "choreographer|dancer|opera singer|operatic bass|puppeteer|textile designer|"
            "fashion designer|printmaker|organist|songwriter|playwright|screenwriter|"
            "radio presenter|museum curator|glassblower|luthier|bookbinder|typographer",
    "science": "chemist|physicist|botanist|geologist|mathematician|astronomer|ornithologist|"
               "marine biologist|economist|historian|linguist|anthropologist|archaeologist|"
               "pharmacologist|surgeon|veterinarian|cartographer|civil engineer|architect|"
               "meteorologist|entomologist|philosopher|statistician|psychologist",
    "sport": "footballer|cricketer|cyclist|rower|chess player|sprinter|boxer|fencer|"
             "mountaineer|long-distance runner|swimmer|rugby player|tennis player|"
             "ski jumper|racing driver|football coach",
    "public": "diplomat|politician|trade unionist|lawyer|judge|civil servant|naval officer|"
              "army officer|missionary|bishop|schoolteacher|librarian|archivist|banker|"
              "publisher|editor|entrepreneur|restaurateur|chef|aviator|explorer|nurse|"
              "social worker|economic adviser",
}
OCC_DOMAIN = {occ: dom for dom, text in OCCUPATIONS.items() for occ in text.split("|")}
OCC_ADJECTIVES = ("retired", "award-winning", "self-taught", "prolific", "amateur", "former",
                  "celebrated", "little-known", "influential", "versatile")

SUBJECTS = ("law", "medicine", "chemistry", "music", "painting", "architecture",
            "mathematics", "history", "theology", "engineering", "philosophy", "economics",
            "botany", "physics", "languages", "agriculture", "drawing", "navigation")
TOPICS = ("tidal mills", "river birds", "early printing", "glacier movement", "folk songs",
          "harbour design", "the history of maps", "bridge foundations", "wild orchids",
          "children's reading", "railway timetables", "coastal erosion", "bell casting",
          "medieval music", "soil chemistry", "street lighting", "pigeon racing",
          "the making of violins", "winter storms", "public libraries", "beekeeping",
          "old coins", "mountain rescue", "weaving patterns")
WORKS = {"arts": ("novel", "album", "play", "film", "collection of poems", "exhibition",
                  "opera", "symphony", "book"),
         "science": ("book", "monograph", "textbook", "survey"),
         "sport": ("book", "memoir"),
         "public": ("book", "memoir", "pamphlet", "report")}
TITLES = ("The Long Winter Road", "Salt and Iron", "What the Tide Left?", "A Map of Small Rooms",
          "Who Keeps the Lamps?", "The Glass Orchard", "Where Birds Rest", "Night Ferry",
          "When We Were Nine?", "The Quiet Engine", "Seven Bridges", "Why Sing at All?",
          "The Copper Hour", "Lanterns on the Water", "Wolves and Weather", "Borrowed Light",
          "The Clockmaker's Daughter", "Winter Almanac", "Is Anyone Awake?", "Paper Harbour")
AWARDS = ("a national book prize", "a gold medal", "the city's arts prize",
          "an honorary doctorate", "a silver medal", "a lifetime achievement award",
          "a travelling scholarship", "a state prize for science", "a prize for young composers")
VENTURES = ("printing press", "workshop", "school of music", "shipping firm", "bookshop",
            "theatre company", "research institute", "dance school", "newspaper")
TRADES = ("weavers", "fishermen", "bakers", "farmers", "musicians", "teachers", "carpenters",
          "merchants", "miners", "doctors", "tailors", "printers")
PARENTS = ("a schoolteacher", "a harbour pilot", "a baker", "a railway clerk", "a doctor",
           "a farmer", "a watchmaker", "a shopkeeper", "a miner", "a pastor", "a seamstress",
           "a carpenter", "an engineer", "a lawyer")
ORDINALS = ("eldest", "youngest", "second", "third", "only", "fourth")
RELATIVES = {"he": ("father", "mother", "brother", "sister", "uncle", "grandfather", "wife"),
             "she": ("father", "mother", "brother", "sister", "aunt", "grandmother", "husband")}
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")
NUMBERS = ("two", "three", "four", "five", "six", "seven", "eight", "ten", "twelve")

# ---------------------------------------------------------------------------------------
# Sentence templates.  Fields: N full name, S short name, P birth place (only in cores
# that name it), Q lives in, R moved to, D died in, U studied in, T another place;
# BD/DD birth/death date, BY/DY years, BYQ uncertain birth year ("1874?"), Y1/Y2 years of
# adult life, DEC1/DEC2 decades; occ_a "a painter", Occ_a "A painter", occ "painter";
# he/He/his/His/him pronouns; is/was, lives/lived, has/had by tense.
# "needs": "dead" or "alive"; "keys": facts the clause states (never stated twice).
# ---------------------------------------------------------------------------------------


def _t(text, needs=None, keys=(), domain=None):
    keys = set(keys)
    if any(f in text for f in ("{occ_a}", "{Occ_a}", "{occ}")):
        keys.add("occ")  # the occupation is stated at most once
    return dict(text=text, needs=needs, keys=frozenset(keys), domain=domain)


VERB_PHRASES = [
    _t("began {his} career as {occ_a} in {Q}", keys={"lives"}),
    _t("trained as {occ_a} before moving to {R}", keys={"moved"}),
    _t("worked as {occ_a} for most of {his} life"),
    _t("studied {subj} in {U}", keys={"studied"}),
    _t("became {occ_a} at the age of {age}"),
    _t("emigrated to {R} in {Y1}", keys={"moved"}),
    _t("{is} {occ_a}"),
    _t("spent {his} working life as {occ_a} in {Q}", keys={"lives"}),
]

# The one core that opens "Name. Born in X, ..." (see OPENER_RATE); also among BIRTH_CORES.
OPENER = _t("Born in {P}, {S} {VP}")

# Cores that name the birth place.
BIRTH_CORES = [
    _t("{N} (born {BD} in {P}) {is} {occ_a}", keys={"bdate"}),
    _t("{N} (born {BD}, {P}) {is} {occ_a}", keys={"bdate"}),
    _t("{N} ({BD} {P} -- {DD} {D}) was {occ_a}", "dead", {"bdate", "death"}),
    _t("{N} was born in {P} on {BD}", keys={"bdate"}),
    _t("{N} is {occ_a} who was born in {P} and now lives in {Q}", "alive", {"lives"}),
    _t("{S} was born on {BD} in {P}", keys={"bdate"}),
    _t("{N}, who lives in {Q}, was born in {P} in {BY}", "alive", {"lives", "bdate"}),
    _t("{N} {is} {occ_a} born in {P}"),
    _t("{N} was {occ_a}, born {BD} in {P}", "dead", {"bdate"}),
    _t("{N} grew up in {Q} but was born in {P}", keys={"lives"}),
    _t("{Occ_a} based in {Q}, {N} was born in {P} in {BY}", "alive", {"lives", "bdate"}),
    _t("{N} (born in {BY} in {P}) {is} {occ_a}", keys={"bdate"}),
    _t("{S} was born at {P} in {BY}", keys={"bdate"}),
    _t("{N} was born on {BD} in {P}, the {ordinal} child of {parent}", keys={"bdate", "family"}),
    _t("The {occ} {N} was born in {P} in {BY}", keys={"bdate"}),
    _t("Although born in {P}, {S} spent most of {his} life in {Q}", keys={"lives"}),
    _t("{N} moved to {R} as a child, having been born in {P} on {BD}", keys={"moved", "bdate"}),
    _t("{N} was born and raised in {P}"),
    _t("{S} was born in {P}"),
    _t("{N} {is} {occ_a} and a native of {P}"),
    _t("{N} ({BD} -- {DD}) was {occ_a} born in {P} who died in {D}", "dead", {"bdate", "death"}),
    _t("Born on {BD} in {P}, {N} {VP}", keys={"bdate"}),
    _t("{N} (b. {BY}, {P}) is {occ_a}", "alive", {"bdate"}),
    _t("{S}, born in {P} and educated in {U}, {VP}", keys={"studied"}),
    _t("{N} ({BYQ} -- {DY}) was {occ_a} born in {P}", "dead", {"bdate", "death"}),
    _t("{N} was {occ_a} who died in {D} in {DY}; {he} had been born in {P}", "dead",
       {"death"}),
    _t("{N} (born {BD}) {is} {occ_a} from {P}", keys={"bdate"}),
    _t("In {BY}, {N} was born in {P} to a family of {trade}", keys={"bdate", "family"}),
    _t("{N}, {occ_a} born {BD} in {P}, {VP}", keys={"bdate"}),
    _t("{S} ({BD}, {P} -- {DD}, {D}) was {occ_a}", "dead", {"bdate", "death"}),
    _t("{N} was born in {P} and studied {subj} in {U}", keys={"studied"}),
    _t("{N}, who studied in {U}, was born in {P} on {BD}", keys={"studied", "bdate"}),
    _t("{N} died in {D} on {DD}, having been born in {P} in {BY}", "dead", {"death", "bdate"}),
    _t("{N} has lived in {Q} since {Y1}, but was born in {P}", "alive", {"lives"}),
    _t("{N} {is} {occ_a}; {he} was born in {P} in {BY}", keys={"bdate"}),
    OPENER,
]

# Cores that do not name the birth place.
PLAIN_CORES = [
    _t("{N} {is} {occ_a} who {lives} in {Q}", keys={"lives"}),
    _t("{N} ({BD} -- {DD}) was {occ_a}", "dead", {"bdate", "death"}),
    _t("{N} (born {BD}) is {occ_a}", "alive", {"bdate"}),
    _t("{N} was {occ_a} active in {Q} from the {DEC1}s to the {DEC2}s", "dead", {"lives"}),
    _t("{N} {is} {occ_a} known for {his} work on {topic}", keys={"topic"}),
    _t("{S} studied {subj} in {U} before becoming {occ_a}", keys={"studied"}),
    _t("{N} is {occ_a} based in {Q}", "alive", {"lives"}),
    _t("{N} was {occ_a} who died in {D} in {DY}", "dead", {"death"}),
    _t("{N} ({BYQ} -- {DY}) was {occ_a}", "dead", {"bdate", "death"}),
    _t("The {occ} {N} {has} worked in {T} for many years", keys={"worked"}),
]

# Clauses appended to a core (never naming the birth place).
TAILS = [
    _t(", and now lives in {Q}", "alive", {"lives"}),
    _t(", and {he} moved to {R} in {Y1}", keys={"moved"}),
    _t("; {he} studied {subj} in {U}", keys={"studied"}),
    _t(", and died in {D} in {DY}", "dead", {"death"}),
    _t("; {he} {is} best known for {his} work on {topic}", keys={"topic"}),
    _t(", winning {award} in {Y1}", keys={"award"}),
    _t("; {he} later taught {subj} at a school in {Q}", keys={"taught", "lives"}),
    _t("; {his} first {work} appeared in {Y1}", keys={"work"}),
    _t("; {he} worked for several years in {T} before returning to {R}",
       keys={"worked", "moved"}),
    _t("; {his} best-known {work} is \"{title}\"", keys={"work", "title"}),
    _t(", and {he} has exhibited in {T} and {R}", "alive", {"worked", "moved"}, "arts"),
    _t("; {he} played for clubs in {T} and {R}", None, {"worked", "moved"}, "sport"),
    _t("; {he} retired to {T} in {RY}", keys={"worked", "retired"}),
    _t(" and later settled in {T}", keys={"worked"}),
    _t("; {he} was educated at a boarding school in {U}", keys={"studied"}),
    _t(", spending {num} years in {T}", keys={"worked"}),
    _t("; {his} {relative} was {occ2_a}", keys={"family"}),
    _t("; in {Y1} {he} founded a small {venture} in {Q}", keys={"venture", "lives"}),
    _t(", and {his} papers are held in an archive in {T}", "dead", {"papers", "worked"}),
    _t("; {he} wrote {num} books on {topic}", keys={"topic"}),
    _t(", and was awarded {award} in {Y2}", keys={"award"}),
    _t("; {he} served on the council of {Q} from {Y1} to {Y2}", "dead", {"council", "lives"},
       "public"),
    _t(", although {his} {work} \"{title}\" was written in {T}", keys={"title", "worked"}),
    _t("; {he} {has} lectured in {R} and {T}", keys={"moved", "worked"}, domain="science"),
    _t("; {his} family moved to {R} when {he} was {kidage}", keys={"moved"}),
]

# Clauses that name the birth place late in a long biography.
LATE_TAILS = [
    _t("; {he} was born in {P}"),
    _t(", and was born in {P} in {BY}", keys={"bdate"}),
    _t("; according to one account, {he} was born in {P}"),
    _t("; {his} birthplace was {P}"),
    _t(", having been born in {P}"),
    _t("; {he} had been born in {P} on {BD}", keys={"bdate"}),
]

# Mentions: a person named, with their birth place, in a line about something else.
# In the course's data, as in our course-sized world, every name opens its own line and
# nowhere else; a model as small as the quick preset's then files each birth place under
# "the characters at positions 0, 1, 2, ..." and a question, which puts the name at
# position 10, cannot reach it (README, "The quick preset", measures this).  Seeing each
# name at other positions too makes the fact a property of the name.  Titles use the
# person's other places, never the birth place.
MENTION_SEED = 101  # mentions draw from their own generator: the biographies stay as they are
MENTION_TITLES = ("{Q} Choir", "{T} Book Fair", "The {R} Club", "{U} Academy", "{Q} Rowing Club",
                  "{T} Society")
MENTION_BODIES = (
    "Its founder, {N}, was born in {P}",
    "{N}, born in {P}, was a member",
    "{N} (born in {P}) ran it from {Y1}",
    "Members included {N}, a native of {P}",
    "{N} was born in {P} and joined it in {Y1}",
    "In {Y1}, {N}, born in {P}, led it",
)


def _mention_lines(people, k, seed):
    """k lines per person, shuffled; each names the birth place once, within SEEN_CHARS."""
    rng = random.Random(seed * 1000 + MENTION_SEED)
    lines = []
    for person in people:
        fields = dict(person)
        fields.update({f: person[f].split(",")[0] for f in ("Q", "R", "T", "U")})  # no region in a title
        birth = person["birth"]
        for _ in range(k):
            for _attempt in range(100):
                line = _finish(rng.choice(MENTION_TITLES).format_map(fields),
                               rng.choice(MENTION_BODIES).format_map(fields))
                if line.count(birth) == 1 and line.find(birth) + len(birth) <= SEEN_CHARS:
                    break
            else:  # pragma: no cover - titles and bodies are short
                raise RuntimeError(f"could not write a mention of {person['name']}")
            lines.append(line)
    rng.shuffle(lines)
    return lines


# ---------------------------------------------------------------------------------------
# The world.
# ---------------------------------------------------------------------------------------

_PLACE_WEIGHTS = [1.0 / (r + ZIPF_B) ** ZIPF_S for r in range(len(PLACE_RANKING))]
_total = sum(_PLACE_WEIGHTS)
PLACE_PROBS = [w / _total for w in _PLACE_WEIGHTS]
_CUM = []
_acc = 0.0
for _p in PLACE_PROBS:
    _acc += _p
    _CUM.append(_acc)
_CUM[-1] = 1.0
del _total, _acc, _p


def _draw_place(rng):
    return PLACE_RANKING[min(bisect.bisect_right(_CUM, rng.random()), len(_CUM) - 1)]


def _stratified_places(rng, n):
    """n birth places in a random order: place k gets floor(n * p_k) people for sure and the
    remaining ones are drawn by the fractional parts of n * p_k.  The common places thus keep
    their share even in a small world, while the rare ones come and go as in a sample."""
    if n == 0:
        return []
    counts = [int(n * p) for p in PLACE_PROBS]
    out = [place for place, c in zip(PLACE_RANKING, counts) for _ in range(c)]
    rest = n - len(out)
    if rest:
        fractions = [n * p - c for p, c in zip(PLACE_PROBS, counts)]
        out += rng.choices(PLACE_RANKING, weights=fractions, k=rest)
    rng.shuffle(out)
    return out


def _article(phrase):
    return ("an " if phrase[0].lower() in "aeiou" else "a ") + phrase


_ALL_PLACE_NAMES = tuple(sorted(PLACES, key=len, reverse=True))


def _contains_place(text):
    return any(p in text for p in _ALL_PLACE_NAMES)


ASCII_FOLD_RATE = 0.75
_FOLD = {"ø": "o", "Ø": "O", "ł": "l", "Ł": "L", "ı": "i", "æ": "ae", "ß": "ss", "đ": "d"}


def _fold(text):
    text = "".join(_FOLD.get(c, c) for c in text)
    return "".join(c for c in unicodedata.normalize("NFKD", text)
                   if not unicodedata.combining(c))


_FEMININE = (("owski", "owska"), ("ecki", "ecka"), ("ski", "ska"), ("ov", "ova"), ("in", "ina"))


def _make_name(rng):
    styles = list(NAME_STYLES)
    style = rng.choices(styles, weights=[NAME_STYLES[s]["weight"] for s in styles])[0]
    st = NAME_STYLES[style]
    he = "he" if rng.random() < 0.7 else "she"
    given = rng.choice(st[he])
    sur = rng.choice(st["pre"]) + rng.choice(st["suf"])
    if style == "slavic" and he == "she":
        for a, b in _FEMININE:
            if sur.endswith(a):
                sur = sur[: -len(a)] + b
                break
    if style == "nordic" and rng.random() < 0.15:
        sur = rng.choice(st["he"]) + ("sson" if rng.random() < 0.5 else "sen")
    r = rng.random()
    others = [g for g in st[he] if g != given]
    initial = lambda: rng.choice("ABCDEFGHJKLMNOPRSTVW") + "."  # noqa: E731
    if r < 0.003:
        name = rng.choice(MONONYM_PARTS[0]) + rng.choice(MONONYM_PARTS[1])
        return name, name, he, style
    if r < 0.038:  # middle initial
        tokens, short = [given, initial(), sur], sur
    elif r < 0.13:  # middle name
        tokens, short = [given, rng.choice(others), sur], sur
    elif r < 0.175:  # particle or double surname
        if st["particles"]:
            part = rng.choice(st["particles"])
            tokens, short = [given, part, sur], part + " " + sur
        else:
            sur2 = rng.choice(st["pre"]) + rng.choice(st["suf"])
            tokens, short = [given, sur, sur2], sur2
    elif r < 0.185:  # initials only
        tokens, short = [initial(), initial(), sur], sur
    elif r < 0.205:  # four or five parts
        middle = [rng.choice(others)]
        if rng.random() < 0.3:
            middle.append(initial())
        if st["particles"]:
            tokens, short = [given] + middle + [rng.choice(st["particles"]), sur], sur
        else:
            sur2 = rng.choice(st["pre"]) + rng.choice(st["suf"])
            tokens, short = [given] + middle + [sur, sur2], sur2
    else:
        tokens, short = [given, sur], sur
    name = " ".join(tokens)
    if rng.random() < ASCII_FOLD_RATE:  # most names lose their accents, as in English texts
        name, short = _fold(name), _fold(short)
    return name, short, he, style


def _format_date(fmt, day, month, year):
    if fmt == "dmy":
        return f"{day} {MONTHS[month]} {year}"
    return f"{MONTHS[month]} {day}, {year}"


def _make_life(rng, person):
    by = int(rng.triangular(1790, 1996, 1950))
    alive = (by >= 1975 or (by >= 1940 and rng.random() < 0.9)
             or (1925 <= by < 1940 and rng.random() < 0.5))
    if not alive:
        dy = min(by + int(rng.triangular(30, 99, 76)), 2023)
        if dy - by < 30:
            dy = by + 30
    else:
        dy = None
    last = dy if dy else 2023
    fmt = "dmy" if rng.random() < 0.55 else "mdy"
    person.update(
        alive=alive, BY=by, DY=dy,
        BD=_format_date(fmt, rng.randint(1, 28), rng.randrange(12), by),
        DD=_format_date(fmt, rng.randint(1, 28), rng.randrange(12), dy) if dy else None,
        BYQ=f"{by}?" if rng.random() < 0.5 else f"c. {by}",
    )
    y1 = rng.randint(by + 18, max(by + 18, last - 5))
    y2 = rng.randint(y1 + 1, max(y1 + 1, last))
    dec1 = (by + 20) // 10 * 10
    dec2 = max(dec1 + 10, min(dec1 + 10 * rng.randint(1, 4), last // 10 * 10))
    occ = rng.choice(sorted(OCC_DOMAIN))
    occ_phrase = (rng.choice(OCC_ADJECTIVES) + " " + occ) if rng.random() < 0.25 else occ
    he = person["he"]
    person.update(
        Y1=y1, Y2=y2, RY=max(y2, min(last, by + rng.randint(55, 70))),
        DEC1=dec1, DEC2=dec2, occ=occ, domain=OCC_DOMAIN[occ],
        occ_a=_article(occ_phrase),
        he=he, him="him" if he == "he" else "her", his="his" if he == "he" else "her",
        subj=rng.choice(SUBJECTS), topic=rng.choice(TOPICS),
        work=rng.choice(WORKS[OCC_DOMAIN[occ]]),
        title=rng.choice(TITLES), award=rng.choice(AWARDS), venture=rng.choice(VENTURES),
        trade=rng.choice(TRADES), parent=rng.choice(PARENTS), ordinal=rng.choice(ORDINALS),
        relative=rng.choice(RELATIVES[he]), occ2_a=_article(rng.choice(sorted(OCC_DOMAIN))),
        num=rng.choice(NUMBERS), age=rng.randint(17, 38), kidage=rng.randint(2, 14),
    )
    person["Occ_a"] = person["occ_a"][0].upper() + person["occ_a"][1:]
    person["is"] = "is" if alive else "was"
    person["lives"] = "lives" if alive else "lived"
    person["has"] = "has" if alive else "had"
    person["He"] = he.capitalize()
    person["His"] = person["his"].capitalize()


def _display(rng, place, p_region):
    region = PLACES[place][0]
    if region and place not in region and rng.random() < p_region:
        return f"{place}, {region}"
    return place


def _clash(a, a_disp, b, b_disp):
    return a in b_disp or b in a_disp


def _make_places(rng, person, birth):
    person["birth"] = birth
    person["P"] = _display(rng, birth, 0.3)
    chosen = [(birth, person["P"])]
    for field in ("Q", "R", "D", "U", "T"):
        for _ in range(1000):
            place = _draw_place(rng)
            disp = _display(rng, place, 0.25)
            if all(not _clash(place, disp, c, cd) for c, cd in chosen):
                break
        else:  # pragma: no cover - the place list is large
            raise RuntimeError("could not draw distinct places")
        chosen.append((place, disp))
        person[field] = disp


def _compatible(templates, person, used_keys=frozenset(), need_city=False):
    out = []
    for t in templates:
        if t["needs"] == "dead" and person["alive"]:
            continue
        if t["needs"] == "alive" and not person["alive"]:
            continue
        if t["keys"] & used_keys:
            continue
        if t["domain"] and t["domain"] != person["domain"]:
            continue
        if need_city and "at {P}" in t["text"]:
            continue
        out.append(t)
    return out


def _fill(rng, template, person, used_keys):
    fields = dict(person)
    keys = set(template["keys"])
    if "{VP}" in template["text"]:
        vps = _compatible(VERB_PHRASES, person, frozenset(used_keys | keys))
        vp = rng.choice(vps)
        fields["VP"] = vp["text"].format_map(fields)
        keys |= vp["keys"]
    return template["text"].format_map(fields), frozenset(keys)


def _finish(name, body):
    body = body[0].upper() + body[1:]
    return f"{name}. {body} ."


def _biography(rng, person, category, target):
    """One document for person whose birth place is named early (within SEEN_CHARS
    characters), late (only after them), or not at all (absent)."""
    name, birth = person["name"], person["birth"]
    prefix_len = len(name) + 2
    is_country = PLACES[birth][1] == "country"
    cores = PLAIN_CORES
    if category == "early":
        cores = [OPENER] if rng.random() < OPENER_RATE else BIRTH_CORES
    for _attempt in range(300):
        cands = []
        for t in _compatible(cores, person, need_city=is_country):
            text, keys = _fill(rng, t, person, frozenset())
            if category == "early":
                pos = prefix_len + text.find(birth)
                if text.find(birth) < 0 or pos + len(birth) > SEEN_CHARS:
                    continue
            cands.append((text, keys))
        if not cands:
            continue
        fitting = [c for c in cands if prefix_len + len(c[0]) + 2 <= target + 12]
        body, used = rng.choice(fitting) if fitting else min(cands, key=lambda c: len(c[0]))

        def add_tails(body, used, goal, slack):
            while prefix_len + len(body) + 2 < goal - 6:
                opts = []
                for t in _compatible(TAILS, person, used):
                    text, keys = _fill(rng, t, person, used)
                    if prefix_len + len(body) + len(text) + 2 <= goal + slack:
                        opts.append((text, keys))
                if not opts:
                    break
                text, keys = rng.choice(opts)
                body, used = body + text, used | keys
            return body, used

        if category == "late":
            body, used = add_tails(body, used, SEEN_CHARS - 4, 60)
            lates = _compatible(LATE_TAILS, person, used)
            if not lates:
                continue
            text, keys = _fill(rng, rng.choice(lates), person, used)
            body, used = body + text, used | keys
        body, used = add_tails(body, used, target, 12)
        doc = _finish(name, body)
        count = doc.count(birth)
        if len(doc) > LEN_MAX or "  " in doc:
            continue
        if category == "absent" and count != 0:
            continue
        if category != "absent" and count != 1:
            continue
        if category == "early" and birth not in doc[:SEEN_CHARS]:
            continue
        if category == "late" and birth in doc[:SEEN_CHARS]:
            continue
        return doc
    raise RuntimeError(f"could not write a {category} biography for {name}")


def _target_length(rng, minimum=LEN_MIN):
    while True:
        n = int(round(math.exp(rng.gauss(LEN_MU, LEN_SIGMA))))
        if minimum <= n <= LEN_MAX:
            return n


def _categories(rng, n):
    absent = round(n * ABSENT_RATE)
    late = round(n * LATE_RATE)
    cats = ["absent"] * absent + ["late"] * late + ["early"] * (n - absent - late)
    rng.shuffle(cats)
    return cats


def _resolve_splits(n_people, n_train, n_dev, n_test):
    given = {k: v for k, v in (("train", n_train), ("dev", n_dev), ("test", n_test))
             if v is not None}
    for k, v in given.items():
        if not isinstance(v, int) or v < 0:
            raise ValueError(f"n_{k} must be a non-negative int")
    free = [k for k in ("train", "dev", "test") if k not in given]
    left = n_people - sum(given.values())
    if left < 0:
        raise ValueError("n_train + n_dev + n_test exceeds n_people")
    if free:
        ratio = dict(zip(("train", "dev", "test"), COURSE_SPLITS))
        total = sum(ratio[k] for k in free)
        for k in free[:-1]:
            given[k] = round(left * ratio[k] / total)
        given[free[-1]] = left - sum(given[k] for k in free[:-1])
    return given["train"], given["dev"], given["test"]


def build_world(n_people=COURSE_PEOPLE, seed=DEFAULT_SEED, n_train=None, n_dev=None,
                n_test=None, mentions=0):
    """The world as data: (docs, people); people are dicts with at least name, birth,
    split ("train", "dev", "test" or None for people without a question) and category.
    docs[i] is the biography of people[i]; mention lines, if any, follow them."""
    if not isinstance(n_people, int) or n_people < 1:
        raise ValueError("n_people must be a positive int")
    if not isinstance(mentions, int) or mentions < 0:
        raise ValueError("mentions must be a non-negative int")
    n_train, n_dev, n_test = _resolve_splits(n_people, n_train, n_dev, n_test)
    rng = random.Random(seed)
    names, people = set(), []
    while len(people) < n_people:
        name, short, he, style = _make_name(rng)
        if name in names or _contains_place(name):
            continue
        names.add(name)
        people.append(dict(name=name, N=name, S=short, he=he, style=style))
    n_extra = n_people - n_train - n_dev - n_test
    splits = (["train"] * n_train + ["dev"] * n_dev + ["test"] * n_test + [None] * n_extra)
    sizes = (("train", n_train), ("dev", n_dev), ("test", n_test), (None, n_extra))
    births, cats = [], []
    for _split, n in sizes:
        births += _stratified_places(rng, n)
        cats += _categories(rng, n)
    docs = []
    for person, split, birth, cat in zip(people, splits, births, cats):
        person.update(split=split, category=cat)
        _make_life(rng, person)
        _make_places(rng, person, birth)
        target = _target_length(rng, 150 if cat == "late" else LEN_MIN)
        docs.append(_biography(rng, person, cat, target))
    _cover_question_characters(rng, docs, people)
    return docs + _mention_lines(people, mentions, seed), people


def _question(name):
    return f"Where was {name} born?"


def _cover_question_characters(rng, docs, people):
    """The vocabulary comes from wiki.txt alone: make sure every character of every question
    and answer occurs in it, by giving a few long-enough biographies one more clause."""
    def missing():
        have = set("".join(docs))
        need = set()
        for p in people:
            if p["split"] is not None:
                need |= set(_question(p["name"])) | set(p["birth"])
        return sorted(need - have)

    order = list(range(len(people)))
    rng.shuffle(order)
    for ch in missing():
        if ch in set("".join(docs)):
            continue
        places = sorted(p for p in PLACES if ch in p)
        titles = [t for t in TITLES if ch in t]
        for i in order:
            person, doc = people[i], docs[i]
            if person["category"] != "early":
                continue
            if places:
                place = places[0]
                if _clash(place, place, person["birth"], person["P"]) or place in doc:
                    continue
                extra = f"; {person['he']} later visited {place}"
            elif titles:
                extra = f"; {person['his']} last {person['work']} was \"{titles[0]}\""
            else:
                raise RuntimeError(f"no way to put {ch!r} into wiki.txt")
            new = doc[:-2] + extra + " ."
            if len(new) <= LEN_MAX and new.count(person["birth"]) == 1:
                docs[i] = new
                break
        else:
            raise RuntimeError(f"no biography could take {ch!r}")


def generate(out_dir, n_people=COURSE_PEOPLE, seed=DEFAULT_SEED, n_train=None, n_dev=None,
             n_test=None, mentions=0):
    """Write the five data files of one world into out_dir (created if needed).

    n_people people each get one biography in wiki.txt (train people first, then dev, test,
    then people without a question).  Split sizes left as None share the people not
    already assigned in the course's 2000 : 500 : 437 proportions, so the defaults give the
    course's sizes and e.g. generate(d, n_people=400, n_dev=200) gives 164 / 200 / 36.
    mentions=K adds K mention lines per person after the biographies.
    Returns a dict with the paths written and the split sizes."""
    docs, people = build_world(n_people, seed, n_train, n_dev, n_test, mentions)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = collections.defaultdict(list)
    for p in people:
        if p["split"] is not None:
            rows[p["split"]].append((_question(p["name"]), p["birth"]))
    contents = {
        "wiki.txt": "\n".join(docs),
        "birth_places_train.tsv": "".join(f"{q}\t{a}\n" for q, a in rows["train"]),
        "birth_dev.tsv": "".join(f"{q}\t{a}\n" for q, a in rows["dev"]),
        "birth_test_inputs.tsv": "".join(f"{q}\n" for q, _ in rows["test"]),
        "birth_test.tsv": "".join(f"{q}\t{a}\n" for q, a in rows["test"]),
    }
    paths = {}
    for fname, text in contents.items():
        path = out / fname
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        paths[fname] = path
    return dict(paths=paths, n_people=n_people, seed=seed, n_train=len(rows["train"]),
                n_dev=len(rows["dev"]), n_test=len(rows["test"]), mentions=mentions)

# ---------------------------------------------------------------------------------------
# Statistics (for any folder holding files of this layout, ours or the course's).
# ---------------------------------------------------------------------------------------

_Q_HEAD, _Q_TAIL = "Where was ", " born?"


def _read_rows(path):
    text = path.read_text(encoding="utf-8")
    return [line.split("\t") for line in text.split("\n") if line]


def _name_of(question):
    assert question.startswith(_Q_HEAD) and question.endswith(_Q_TAIL), question
    return question[len(_Q_HEAD):-len(_Q_TAIL)]


def compute_stats(folder):
    """Statistics of the data files in folder (birth_test.tsv is optional)."""
    folder = Path(folder)
    wiki = (folder / "wiki.txt").read_text(encoding="utf-8")
    docs = wiki.split("\n")
    lengths = [len(d) for d in docs]
    splits = {"train": _read_rows(folder / "birth_places_train.tsv"),
              "dev": _read_rows(folder / "birth_dev.tsv")}
    test_inputs = _read_rows(folder / "birth_test_inputs.tsv")
    if (folder / "birth_test.tsv").exists():
        splits["test"] = _read_rows(folder / "birth_test.tsv")
    first_sentence = {d.split(". ")[0] for d in docs}
    by_prefix = {}  # every "NAME" such that a document starts with "NAME. "
    for d in docs:
        i = d.find(". ")
        while i >= 0:
            by_prefix.setdefault(d[:i], d)
            i = d.find(". ", i + 1)

    def biography(name):
        return by_prefix.get(name)

    s = {"documents": len(docs), "wiki_trailing_newline": wiki.endswith("\n"),
         "wiki_chars": len(set(wiki)),
         "wiki_non_ascii_chars": len({c for c in wiki if ord(c) > 127}),
         "len_min": min(lengths), "len_median": statistics.median(lengths),
         "len_mean": statistics.mean(lengths), "len_max": max(lengths),
         "len_over_seen": sum(n > SEEN_CHARS for n in lengths) / len(lengths),
         "n_train": len(splits["train"]), "n_dev": len(splits["dev"]),
         "n_test": len(test_inputs)}
    names = {k: [_name_of(r[0]) for r in rows] for k, rows in splits.items()}
    names["test"] = [_name_of(r[0]) for r in test_inputs]
    all_names = names["train"] + names["dev"] + names["test"]
    s["distinct_names"] = len(set(all_names))
    s["shared_train_dev"] = len(set(names["train"]) & set(names["dev"]))
    s["shared_train_test"] = len(set(names["train"]) & set(names["test"]))
    s["shared_dev_test"] = len(set(names["dev"]) & set(names["test"]))
    s["names_non_ascii"] = sum(any(ord(c) > 127 for c in n) for n in all_names) / len(all_names)
    s["names_with_dot"] = sum("." in n for n in all_names) / len(all_names)
    for k in ("train", "dev", "test"):
        ns = names[k]
        s[f"{k}_with_bio"] = sum(biography(n) is not None for n in ns) / len(ns) if ns else 0
        s[f"{k}_first_sentence_match"] = (sum(n in first_sentence for n in ns) / len(ns)
                                          if ns else 0)
        if k in splits and splits[k]:
            rows = splits[k]
            found = [biography(_name_of(q)) or "" for q, _ in rows]
            s[f"{k}_place_in_bio"] = sum(a in d for (q, a), d in zip(rows, found)) / len(rows)
            s[f"{k}_place_in_seen"] = (sum(a in d[:SEEN_CHARS] for (q, a), d in zip(rows, found))
                                       / len(rows))
            s[f"{k}_place_after_name"] = sum(
                0 <= d.find(a) - len(_name_of(q)) <= AFTER_NAME for (q, a), d in zip(rows, found)) / len(rows)
            places = collections.Counter(a for _, a in rows)
            top, top_n = places.most_common(1)[0]
            s[f"{k}_distinct_places"] = len(places)
            s[f"{k}_top_place"] = top
            s[f"{k}_top_share"] = top_n / len(rows)
    train_places = {a for _, a in splits["train"]}
    s["dev_place_unseen_in_train"] = (sum(a not in train_places for _, a in splits["dev"])
                                      / max(1, len(splits["dev"])))
    s["train_dev_distinct_places"] = len(train_places | {a for _, a in splits["dev"]})
    need = set()
    for k, rows in splits.items():
        for r in rows:
            need |= set(r[0]) | set(r[1] if len(r) > 1 else "")
    for r in test_inputs:
        need |= set(r[0])
    s["question_chars_missing"] = "".join(sorted(need - set(wiki)))
    # Whether the birth place is the first place (from our list) the biography names.
    firsts = []
    for q, a in splits["dev"]:
        d = biography(_name_of(q))
        if not d or a not in d:
            continue
        body = d[len(_name_of(q)) + 2:]
        pos = [(body.find(p), -len(p), p) for p in set(_ALL_PLACE_NAMES) | {a} if p in body]
        firsts.append(min(pos)[2] == a)
    s["dev_place_first_named"] = sum(firsts) / len(firsts) if firsts else 0
    return s


def _pct(x):
    return f"{100 * x:.1f}%"


STAT_ROWS = [
    ("documents in wiki.txt", lambda s: str(s["documents"])),
    ("wiki.txt ends with a newline", lambda s: "yes" if s["wiki_trailing_newline"] else "no"),
    ("distinct characters in wiki.txt (non-ASCII)",
     lambda s: f"{s['wiki_chars']} ({s['wiki_non_ascii_chars']})"),
    ("document length min / median / mean / max",
     lambda s: f"{s['len_min']} / {s['len_median']:g} / {s['len_mean']:.1f} / {s['len_max']}"),
    (f"documents longer than {SEEN_CHARS} characters", lambda s: _pct(s["len_over_seen"])),
    ("train / dev / test questions", lambda s: f"{s['n_train']} / {s['n_dev']} / {s['n_test']}"),
    ("distinct names in all questions", lambda s: str(s["distinct_names"])),
    ("names shared train-dev / train-test / dev-test",
     lambda s: f"{s['shared_train_dev']} / {s['shared_train_test']} / {s['shared_dev_test']}"),
    ("names with non-ASCII letters / with a '.'",
     lambda s: f"{_pct(s['names_non_ascii'])} / {_pct(s['names_with_dot'])}"),
    ("train / dev / test people with a biography (`NAME. ` line)",
     lambda s: " / ".join(_pct(s[f"{k}_with_bio"]) for k in ("train", "dev", "test"))),
    ("same, matching `doc.split('. ')[0]` only (dev)",
     lambda s: _pct(s["dev_first_sentence_match"])),
    ("dev: birth place named in the biography", lambda s: _pct(s["dev_place_in_bio"])),
    (f"dev: birth place in its first {SEEN_CHARS} characters",
     lambda s: _pct(s["dev_place_in_seen"])),
    (f"dev: birth place right after the name (within {AFTER_NAME} characters)",
     lambda s: _pct(s["dev_place_after_name"])),
    ("train: birth place named / in first 112 characters",
     lambda s: f"{_pct(s['train_place_in_bio'])} / {_pct(s['train_place_in_seen'])}"),
    ("test: birth place named / in first 112 characters",
     lambda s: (f"{_pct(s['test_place_in_bio'])} / {_pct(s['test_place_in_seen'])}"
                if "test_place_in_bio" in s else "n/a (no answers)")),
    ("distinct places train / dev / train+dev",
     lambda s: f"{s['train_distinct_places']} / {s['dev_distinct_places']} / "
               f"{s['train_dev_distinct_places']}"),
    ("most common dev place (share of dev)",
     lambda s: f"{s['dev_top_place']} ({_pct(s['dev_top_share'])})"),
    ("most common train place (share of train)",
     lambda s: f"{s['train_top_place']} ({_pct(s['train_top_share'])})"),
    ("dev answers never seen as a train answer", lambda s: _pct(s["dev_place_unseen_in_train"])),
    ("question characters missing from wiki.txt",
     lambda s: repr(s["question_chars_missing"]) if s["question_chars_missing"] else "none"),
    ("dev: birth place is the first listed place named (places of this file's list)",
     lambda s: _pct(s["dev_place_first_named"])),
]


def default_course_dir():
    """<repo>/../shared/course-data, where the course's own files may be (never shipped)."""
    return HERE.parent.parent / "shared" / "course-data"


def stats_table(ours_dir=HERE, course_dir=None):
    ours = compute_stats(ours_dir)
    course_dir = Path(course_dir) if course_dir else default_course_dir()
    course = compute_stats(course_dir) if (course_dir / "wiki.txt").exists() else None
    lines = ["| statistic | ours | course |" if course else "| statistic | ours |",
             "| --- | --- | --- |" if course else "| --- | --- |"]
    for label, fmt in STAT_ROWS:
        cells = [label, fmt(ours)] + ([fmt(course)] if course else [])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(HERE),
                    help="folder to write (or, with --stats, to read); default: this folder")
    ap.add_argument("--stats", action="store_true",
                    help="print a Markdown table of statistics (ours vs course) and exit")
    ap.add_argument("--course", default=None,
                    help="folder with the course data (default: <repo>/../shared/course-data)")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--people", type=int, default=COURSE_PEOPLE)
    ap.add_argument("--train", type=int, default=None)
    ap.add_argument("--dev", type=int, default=None)
    ap.add_argument("--test", type=int, default=None)
    ap.add_argument("--mentions", type=int, default=0,
                    help="mention lines per person after the biographies (the quick preset's world)")
    args = ap.parse_args(argv)
    if args.stats:
        print(stats_table(args.out, args.course))
        return 0
    info = generate(args.out, n_people=args.people, seed=args.seed, n_train=args.train,
                    n_dev=args.dev, n_test=args.test, mentions=args.mentions)
    print(f"wrote {', '.join(info['paths'])} to {args.out} "
          f"({info['n_train']} / {info['n_dev']} / {info['n_test']} questions, "
          f"{info['n_people']} biographies, {info['n_people'] * args.mentions} mention lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
