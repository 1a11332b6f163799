# the tiny release's speaker statistics, as ChatTTS/config/config.py holds the real ones
class Path:
    spk_stat: str = (
        "怏沓爸襴崽懐諮圽糎埃潀謑尚熌勤圹杏啳熔蛞嬃脫嚱墻癍嬓庼葰籜奌咲蔰構悫穦茢简㴁"
    )
